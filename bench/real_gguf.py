"""Real diffusion GGUFs at full speed: llama.cpp's diffusion architectures against their cacheable twins.

On 135M stand-ins in the LLaDA and Dream architectures (SmolLM2's weights, bench/stand_in.py), N = 256,
blocks of 32, a 200-token prompt, greedy: the native file with full re-decoding (llama.cpp builds these
architectures without a KV cache), its twin (models/gguf_twin.py) with the prefix cache, with the dual
cache, and with the dual cache and threshold 0.9 (Fast-dLLM). Side by side in one run: seconds, passes,
ms per pass, and how many of the 256 tokens equal the native run's. With --cli, llama.cpp's own
llama-diffusion-cli on the native file too (build it from the vendored llama.cpp of the llama-cpp-python
sdist; see docs/benchmarks.md).
One llama.cpp job at a time: run it on an idle machine.

    .venv/bin/python bench/real_gguf.py [--archs llada,dream] [--cli PATH/llama-diffusion-cli]
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from diffusion import Run, run_draft
from machine import describe_machine
from stand_in import write_stand_in

from engines.diffusion.engine import DiffusionEngine
from engines.diffusion.llama_backend import LlamaDiffusionBackend
from engines.diffusion.load_settings import DiffusionLoadSettings
from engines.diffusion.settings import DiffusionSettings
from models.catalogue import resolve_model
from models.gguf_twin import write_twin

BENCH = Path(__file__).resolve().parent
OUT = BENCH / "out"
DOCUMENTS = BENCH / "data" / "documents.txt"
N, BLOCK, STEPS, PROMPT_TOKENS = 256, 32, 64, 200
FIXED = DiffusionSettings.reference(steps=STEPS, block_length=BLOCK, stop_at_eos=False)
THRESHOLD = DiffusionSettings.reference(threshold=0.9, block_length=BLOCK, stop_at_eos=False)


def row(label: str, run: Run, native: Run | None) -> str:
    same = sum(a == b for a, b in zip(run.canvas, native.canvas, strict=True)) if native else N
    speed = f"{native.wall_s / run.wall_s:5.2f}x" if native else "   1x"
    return (
        f"   {label:34} {run.wall_s:7.1f} s {run.passes:4d} passes {run.ms_per_pass:6.0f} ms/pass  {speed}  "
        f"tokens equal to native: {same}/{N}"
    )


def llama_cli(cli: Path, native: Path, prompt_text: str, n_prompt: int) -> str:
    """llama.cpp's own sampler on the native file: the same text (through the chat template, which the
    example always applies), N and K; its canvas is its batch size less its prompt. Its block schedule
    counts blocks over prompt and canvas together (and needs K to divide among them), so it runs Dream's
    timestep schedule: K full passes, what the native row costs per pass."""
    length = n_prompt + N
    command = [
        str(cli), "-m", str(native), "-p", prompt_text, "-t", "2",
        "-c", str(length), "-b", str(length), "-ub", str(length), "-n", str(N),
        "--diffusion-steps", str(STEPS), "--diffusion-eps", "0.001", "--diffusion-algorithm", "4",
        "--temp", "0", "--seed", "0",
    ]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, timeout=1800, check=False)
    found = re.search(r"total time: ([\d.]+)ms, time per step: ([\d.]+)ms", result.stderr + result.stdout)
    if result.returncode != 0 or found is None:
        return f"   llama-diffusion-cli failed ({result.returncode}): {result.stderr.strip().splitlines()[-1:]}"
    total_s, per_step = float(found.group(1)) / 1000, float(found.group(2))
    label = "llama-diffusion-cli, native, timestep"
    return f"   {label:34} {total_s:7.1f} s {STEPS:4d} passes {per_step:6.0f} ms/pass"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--archs", default="llada,dream")
    parser.add_argument("--cli", type=Path, help="llama.cpp's llama-diffusion-cli, for the reference row")
    parser.add_argument("--only-cli", action="store_true", help="run only llama-diffusion-cli's rows")
    args = parser.parse_args()
    print(f"machine: {describe_machine()}")
    source = resolve_model("smollm2-135m-instruct").path
    document = DOCUMENTS.read_text().split("===\n")[0]
    with tempfile.TemporaryDirectory() as twins:
        for arch in args.archs.split(","):
            native_path = write_stand_in(source, OUT / f"smollm2-{arch}-native.gguf", arch=arch, causal=None)
            twin_path = write_twin(native_path, Path(twins))
            native = DiffusionEngine(LlamaDiffusionBackend(native_path, DiffusionLoadSettings(n_ctx=1024)), "native")
            prefix = DiffusionEngine(
                LlamaDiffusionBackend(twin_path, DiffusionLoadSettings(n_ctx=1024, cache="prefix")), "prefix"
            )
            dual_backend = LlamaDiffusionBackend(twin_path, DiffusionLoadSettings(n_ctx=1024))
            if dual_backend.cache_mode != "dual":
                print(f"   the dual cache is not available: {dual_backend.cache_note}")
            dual = DiffusionEngine(dual_backend, "dual")
            prompt = native.backend.tokenize(document, add_bos=True)[:PROMPT_TOKENS]
            print(f"\n{arch} stand-in (135M, Q4_1), prompt {len(prompt)}, N={N}, blocks of {BLOCK}, K={STEPS}")
            if args.only_cli and args.cli:
                text = native.backend.decode(prompt)
                print(llama_cli(args.cli, native_path, text, len(native.backend.instruction_tokens(text))))
                continue
            full = run_draft(native, prompt, N, FIXED, 10_000.0)
            print(row("native, full re-decoding", full, None))
            print(row("twin, prefix cache", run_draft(prefix, prompt, N, FIXED, 10_000.0), full))
            print(row("twin, dual cache", run_draft(dual, prompt, N, FIXED, 10_000.0), full))
            print(row("twin, dual cache, threshold 0.9", run_draft(dual, prompt, N, THRESHOLD, 10_000.0), full))
            if args.cli:
                text = native.backend.decode(prompt)
                print(llama_cli(args.cli, native_path, text, len(native.backend.instruction_tokens(text))))


if __name__ == "__main__":
    main()
