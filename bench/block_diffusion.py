"""Block-causal diffusion against today's dual cache and AR decoding, side by side in one run.

Three 135M diffusion models on llama.cpp: the embedded drafter (sharpen-draft, merged at Q8_0 as the
service serves it) and SmolLM2's own Q4_1 weights as block-causal stand-ins in SDAR's layout (qwen3,
logits in place) and in Fast-dLLM v2's (qwen2, shifted logits), bench/stand_in.py. N = 256 tokens after a
200-token prompt, K = N/4 passes, greedy: the dual cache (blocks of 32), block-causal decoding at blocks
of 4, 8, 16 and 32 (each settled block riding along with the next block's first pass, and at blocks of 8
also with a pass of its own, as before), and AR decoding of 256 tokens by SmolLM2-135M-Instruct Q4_1 (the
AR model beside the drafter, and the stand-ins' own weights), the rows interleaved. Each row: seconds
(median), passes, rows decoded, ms per token, speed as a multiple of AR's; the route estimate from a quick
calibration of that engine, and for the drafter how many tokens equal the dual cache's draft (block-causal
attention is an approximation of the full attention it was trained with). First, what a llama.cpp decode
of b rows against a 200-token cache costs on this CPU, for the AR model and the drafter. The stand-ins'
text means nothing (their weights were trained causally, and the Qwen layouts rotate them differently):
timings only.
One llama.cpp job at a time: run it on an idle machine.

    .venv/bin/python bench/block_diffusion.py [--blocks 4,8,16,32] [--repeats 3] [--models drafter,sdar,fastdllm]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import llama_cpp
from diffusion import ar_seconds, run_draft
from llama_cpp import _internals
from machine import describe_machine
from stand_in import Layout, qwen2_biases, qwen3_norms, write_stand_in

from engines.diffusion.backend import CacheMode
from engines.diffusion.engine import DiffusionEngine
from engines.diffusion.llama_backend import LlamaDiffusionBackend
from engines.diffusion.load_settings import DiffusionLoadSettings
from engines.diffusion.settings import DiffusionSettings
from engines.llama_ar import LlamaAREngine, LlamaSettings
from models.adapted import AdaptedModel, adapter_info, base_as_diffusion, verify_base, write_merged_file
from models.catalogue import resolve_model
from models.gguf_twin import write_twin
from router.cost import DiffusionPlan, estimate_diffusion
from router.cost_measurement import QUICK, calibrate_diffusion

BENCH = Path(__file__).resolve().parent
OUT = BENCH / "out"
DOCUMENTS = BENCH / "data" / "documents.txt"
ADAPTER = BENCH.parent / "models" / "embedded" / "sharpen-draft-lora.gguf"
N, PROMPT_TOKENS = 256, 200
STEPS = N // 4
ROWS = (1, 2, 4, 8, 16, 32, 64)


@dataclass(frozen=True)
class Model:
    label: str
    path: Path


def drafter_file(quantization: str = "Q8_0") -> Path:
    """The embedded drafter as the service serves it: SmolLM2 with the adapter merged, at Q8_0 (or another
    ggml type, for bench/merged_types.py)."""
    target = OUT / f"sharpen-draft-merged-{quantization.lower()}.gguf"
    if not target.exists():
        base = resolve_model("smollm2-135m-instruct").path
        info = adapter_info(ADAPTER)
        verify_base(base, info)
        OUT.mkdir(parents=True, exist_ok=True)
        write_merged_file(AdaptedModel(base, info, base_as_diffusion(base, info)), target, quantization)
    return target


def stand_in(name: str, arch: str, shift: bool, extra: Layout) -> Path:
    source = resolve_model("smollm2-135m-instruct").path
    return write_stand_in(source, OUT / f"smollm2-{name}.gguf", arch=arch, causal=False, shift=shift, extra=extra)


def twin(arch: str) -> Path:
    """SmolLM2's weights as llama.cpp's `arch` diffusion file, served from its cacheable twin as the service
    serves real LLaDA and Dream files: for greedy agreement of block-causal decoding with the dual cache
    on a model made for full attention (run with --models llada,dream)."""
    source = resolve_model("smollm2-135m-instruct").path
    native = write_stand_in(source, OUT / f"smollm2-{arch}-native.gguf", arch=arch, causal=None, shift=arch != "llada")
    return write_twin(native, OUT / "twins")


MODELS: dict[str, Callable[[], Model]] = {
    "drafter": lambda: Model("embedded drafter (sharpen-draft, merged Q8_0)", drafter_file()),
    "sdar": lambda: Model(
        "SDAR-layout stand-in (qwen3, Q4_1, in place)", stand_in("sdar", "qwen3", False, qwen3_norms)
    ),
    "fastdllm": lambda: Model(
        "Fast-dLLM v2-layout stand-in (qwen2, Q4_1, shifted)", stand_in("fastdllm", "qwen2", True, qwen2_biases)
    ),
    "llada": lambda: Model("LLaDA stand-in's twin (llama, Q4_1, in place)", twin("llada")),
    "dream": lambda: Model("Dream stand-in's twin (qwen2, Q4_1, shifted)", twin("dream")),
}


def row_costs(
    llama: llama_cpp.Llama,
    prompt: list[int],
    repeats: int = 5,
    sizes: Sequence[int] = ROWS,
    outputs: Callable[[int], int] = lambda rows: rows,
) -> dict[int, float]:
    """Median seconds of one decode of b rows after `prompt`, which stays cached, for each b in `sizes`; logits
    for the last outputs(b) rows (every row by default)."""
    ctx = llama._ctx
    batch = _internals.LlamaBatch(n_tokens=len(prompt) + max(sizes), embd=0, n_seq_max=1, verbose=False)

    def decode(tokens: list[int], position: int, wanted: int) -> None:
        raw = batch.batch
        raw.n_tokens = len(tokens)
        for i, token in enumerate(tokens):
            raw.token[i], raw.pos[i], raw.n_seq_id[i], raw.seq_id[i][0] = token, position + i, 1, 0
            raw.logits[i] = i >= len(tokens) - wanted
        if llama_cpp.llama_decode(ctx.ctx, raw) != 0:
            raise RuntimeError("llama.cpp failed to decode")

    ctx.kv_cache_clear()
    decode(prompt, 0, 1)
    costs: dict[int, float] = {}
    for rows in sizes:
        times = []
        for _ in range(repeats):
            ctx.kv_cache_seq_rm(0, len(prompt), -1)
            started = time.perf_counter()
            decode(prompt[:rows], len(prompt), outputs(rows))
            times.append(time.perf_counter() - started)
        costs[rows] = statistics.median(times)
    ctx.kv_cache_clear()
    return costs


def print_row_costs(label: str, costs: dict[int, float]) -> None:
    one = costs[1]
    cells = " | ".join(f"{one * 1000:.1f} ms" if rows == 1 else f"{costs[rows] / one:.2f}x" for rows in ROWS)
    print(f"| {label:34} | {cells} |")


@dataclass
class Row:
    label: str
    engine: DiffusionEngine
    settings: DiffusionSettings
    seconds: list[float]
    passes: int = 0
    rows: int = 0
    canvas: tuple[int, ...] = ()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--blocks", default="4,8,16,32")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--models", default="drafter,sdar,fastdllm")
    args = parser.parse_args()
    blocks = [int(b) for b in args.blocks.split(",")]
    print(f"machine: {describe_machine()}")
    ar = LlamaAREngine(resolve_model("smollm2-135m-instruct").path, "smollm2", LlamaSettings(n_ctx=1024))
    document = DOCUMENTS.read_text().split("===\n")[0]
    prompt = ar._llama.tokenize(document.encode(), add_bos=True)[:PROMPT_TOKENS]
    models = [MODELS[name]() for name in args.models.split(",")]

    print(f"\nOne decode of b rows against a {len(prompt)}-token cache, median of 5, relative to one row")
    print(f"| {'model':34} | " + " | ".join(str(rows) for rows in ROWS) + " |")
    print_row_costs("SmolLM2-135M-Instruct Q4_1 (AR)", row_costs(ar._llama, prompt))
    backends: dict[tuple[str, CacheMode], LlamaDiffusionBackend] = {}
    for model in models:
        for cache in ("dual", "block"):
            backends[model.label, cache] = LlamaDiffusionBackend(
                model.path, DiffusionLoadSettings(n_ctx=1024, cache=cache)
            )
        print_row_costs(model.label, row_costs(backends[model.label, "dual"]._llama, prompt))

    fixed = DiffusionSettings.reference(steps=STEPS, stop_at_eos=False)
    tables: dict[str, list[Row]] = {}
    for model in models:
        dual, block = backends[model.label, "dual"], backends[model.label, "block"]
        rows = [Row(f"dual cache, blocks of 32 ({dual.kv_type} KV)", DiffusionEngine(dual, "dual"), fixed, [])]
        rows += [
            Row(
                f"block-causal, blocks of {b} ({block.kv_type} KV)",
                DiffusionEngine(block, "block"),
                replace(fixed, block_length=b),
                [],
            )
            for b in blocks
        ]
        apart = LlamaDiffusionBackend(model.path, DiffusionLoadSettings(n_ctx=1024, cache="block"))
        apart.ride_along = False
        rows.append(
            Row(
                f"block-causal, blocks of 8, each settled block a pass of its own ({apart.kv_type} KV)",
                DiffusionEngine(apart, "block"),
                replace(fixed, block_length=8),
                [],
            )
        )
        tables[model.label] = rows
    ar_times: list[float] = []
    for _ in range(args.repeats):  # interleaved: the machine's noise falls on every row alike
        ar_times.append(ar_seconds(ar, prompt, N))
        for rows in tables.values():
            for row in rows:
                backend = row.engine.backend
                assert isinstance(backend, LlamaDiffusionBackend)
                decoded = backend.decoded_rows
                run = run_draft(row.engine, prompt, N, row.settings, 10_000.0)
                row.seconds.append(run.wall_s)
                row.passes, row.rows, row.canvas = run.passes, backend.decoded_rows - decoded, run.canvas
    ar_s = statistics.median(ar_times)
    print(f"\nAR, SmolLM2-135M-Instruct Q4_1: {N} tokens in {ar_s:.2f} s ({ar_s / N * 1000:.1f} ms/token)")
    for model in models:
        rows = tables[model.label]
        print(f"\n{model.label}: N = {N}, prompt {len(prompt)}, K = {STEPS}, median of {args.repeats}")
        print(
            "| decoding | s | passes | rows decoded | ms/token | x AR's speed | estimate s (off by) | tokens as dual |"
        )
        print("|---|---|---|---|---|---|---|---|")
        estimates = route_estimates(rows, len(prompt))
        for row in rows:
            seconds = statistics.median(row.seconds)
            same = sum(a == b for a, b in zip(row.canvas, rows[0].canvas, strict=True))
            estimate = estimates.get(row.label)
            off = "" if estimate is None else f"{estimate:.2f} ({estimate / seconds - 1:+.0%})"
            print(
                f"| {row.label} | {seconds:.2f} | {row.passes} | {row.rows} | {seconds / N * 1000:.1f} | "
                f"{ar_s / seconds:.2f} | {off} | {same}/{N} |"
            )


def route_estimates(rows: list[Row], prompt_tokens: int) -> dict[str, float]:
    """The router's estimate for each block-causal row, from a quick calibration of that engine (as the
    first draft of a fresh install measures it)."""
    block_rows = [row for row in rows if row.engine.backend.cache_mode == "block"]
    if not block_rows:
        return {}
    costs = calibrate_diffusion(block_rows[0].engine, QUICK, lambda share, what: None, block_rows[0].settings)
    return {
        row.label: estimate_diffusion(
            N, prompt_tokens, 0, DiffusionPlan(STEPS, row.settings.block_length), costs
        ).seconds
        for row in block_rows
    }


if __name__ == "__main__":
    main()
