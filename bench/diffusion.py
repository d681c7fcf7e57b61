"""Diffusion drafting cost on this machine, beside the AR engine on weights of the same size.

Models: SmolLM2-135M-Instruct (Q4_1) for AR, and two diffusion-form stand-ins built from the same
weights (bench/stand_in.py): `llada` architecture (llama.cpp's own diffusion path: no KV cache, every
pass re-decodes everything) and Sharpen's cacheable form (`llama` with causal = false: prefix cache).

1. For N in 64, 128, 256, 512 and settings K = N, K = N/4 and threshold 0.9 (blocks of 32): passes,
   wall time, ms per pass, tokens per second; and the AR engine producing N tokens. A run that would
   pass --budget-s is cut there; its wall time is then extrapolated from the measured ms per pass and
   marked "~" (threshold runs cut short report ">= passes").
2. The share of a pass spent in the Python sampler at N = 256.
3. Prefix cache against full re-decoding on the cacheable stand-in: 200-token prompt, N = 256, blocks
   of 32, K = N/4: wall time and greedy agreement.
4. (--torch) The torch backend (Hugging Face checkpoints) on the CPU at N = 256, blocks of 32, K = 64:
   full recompute, prefix cache and dual cache, ms per pass, speed-up, and how often the cached output
   agrees with the full-recompute output: the final canvas token by token, and pass by pass (the
   cached pass's greedy choice against a full pass's on the same canvas, which one early difference
   cannot snowball). On the 135M stand-in as a Dream checkpoint (200-token prompt; timings) and on the
   trained sharpen-draft as a LLaDA checkpoint (agreement that means something).

    .venv/bin/python bench/diffusion.py [--budget-s 45] [--sizes 64 128 256 512] [--torch | --only-torch]
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import describe_machine
from stand_in import write_stand_in

from engines.cancel import CancelToken
from engines.diffusion.backend import CacheMode
from engines.diffusion.engine import DiffusionEngine
from engines.diffusion.hf.backend import TorchDiffusionBackend
from engines.diffusion.llama_backend import LlamaDiffusionBackend
from engines.diffusion.load_settings import DiffusionLoadSettings
from engines.diffusion.sampler import DiffusionSampler
from engines.diffusion.settings import DiffusionSettings
from engines.events import DiffusionStats, Done, Pass
from engines.llama_ar import LlamaAREngine, LlamaSettings
from models.catalogue import resolve_model

OUT = Path(__file__).resolve().parent / "out"
INSTRUCTION = "Write an email to the team announcing that the office will be closed on Friday for maintenance."
DOCUMENTS = Path(__file__).resolve().parent / "data" / "documents.txt"


@dataclass
class Run:
    passes: int
    wall_s: float
    ms_per_pass: float
    tokens: int
    cut: bool
    sampler_share: float
    canvas: tuple[int, ...]


def run_draft(engine: DiffusionEngine, prompt: list[int], n: int, settings: DiffusionSettings, budget_s: float) -> Run:
    cancel = CancelToken()
    start = time.perf_counter()
    last: Pass | None = None
    done: Done | None = None
    for event in engine.sampler.generate(prompt, n, settings, cancel=cancel):
        if isinstance(event, Pass):
            last = event
            if time.perf_counter() - start > budget_s:
                cancel.cancel()
        else:
            done = event
    assert done is not None and isinstance(done.stats, DiffusionStats) and last is not None
    stats = done.stats
    cut = stats.finish_reason == "cancelled"
    return Run(
        passes=stats.passes,
        wall_s=stats.total_s,
        ms_per_pass=stats.ms_per_pass,
        tokens=n if cut else stats.generated_tokens,
        cut=cut,
        sampler_share=stats.sampler_share,
        canvas=last.canvas,
    )


def ar_seconds(engine: LlamaAREngine, prompt: list[int], n: int) -> float:
    """Time for the AR engine to produce exactly n tokens (end-of-text ignored) after `prompt`."""
    llama = engine._llama
    llama.reset()
    start = time.perf_counter()
    for count, _token in enumerate(llama.generate(prompt, temp=0.0), start=1):
        if count >= n:
            break
    return time.perf_counter() - start


def table_sizes(args: argparse.Namespace, ar: LlamaAREngine, full: DiffusionEngine) -> None:
    prompt = full.backend.instruction_tokens(INSTRUCTION)
    print(f"\n1. Cost by length (prompt {len(prompt)} tokens, blocks of 32; llada stand-in, full re-decoding)")
    columns = ("passes", "wall s", "ms/pass", "tok/s")
    print(f"{'N':>4} {'setting':>10} | " + " | ".join(f"{c:>8}" for c in columns) + " | AR wall s | AR tok/s")
    sampler_share: float | None = None
    for n in args.sizes:
        ar_s = ar_seconds(ar, prompt, n)
        for label, settings in (
            ("K=N", DiffusionSettings.reference(steps=n, block_length=32, stop_at_eos=False)),
            ("K=N/4", DiffusionSettings.reference(steps=n // 4, block_length=32, stop_at_eos=False)),
            ("thr 0.9", DiffusionSettings.reference(threshold=0.9, block_length=32, stop_at_eos=False)),
        ):
            r = run_draft(full, prompt, n, settings, args.budget_s)
            if r.cut and settings.threshold is None:
                wall, mark = r.ms_per_pass * settings.steps / 1000, "~"
                passes = f"{settings.steps}"
            elif r.cut:
                wall, mark, passes = r.wall_s, ">", f">={r.passes}"
            else:
                wall, mark, passes = r.wall_s, " ", f"{r.passes}"
            speed = f"{'<' if mark == '>' else ' '}{n / wall:>7.1f}"
            print(
                f"{n:>4} {label:>10} | {passes:>7} | {mark}{wall:>7.1f} | {r.ms_per_pass:>8.0f} | "
                f"{speed} | {ar_s:>9.2f} | {n / ar_s:>8.1f}"
            )
            if n == 256 and label == "K=N/4":
                sampler_share = r.sampler_share
    if sampler_share is not None:
        print(f"\n2. Python sampler share of a pass at N=256 (K=N/4): {sampler_share * 100:.1f}%  (target <= 10%)")


def caches(args: argparse.Namespace, cacheable_path: Path) -> None:
    def engine(mode: CacheMode) -> DiffusionEngine:
        return DiffusionEngine(
            LlamaDiffusionBackend(cacheable_path, DiffusionLoadSettings(n_ctx=1024, cache=mode)), mode
        )

    full = engine("none")
    document = DOCUMENTS.read_text().split("===\n")[0]
    prompt = full.backend.tokenize(document, add_bos=True)[:200]
    settings = DiffusionSettings.reference(steps=64, block_length=32, stop_at_eos=False)
    print(f"\n3. Caches vs full re-decoding (cacheable stand-in, prompt {len(prompt)}, N=256, blocks of 32, K=64)")
    budget = 10_000.0
    r_full = run_draft(full, prompt, 256, settings, budget)
    print(f"   full re-decoding: {r_full.wall_s:7.1f} s  ({r_full.ms_per_pass:.0f} ms/pass)")
    for mode in ("prefix", "dual"):
        r_cached = run_draft(engine(mode), prompt, 256, settings, budget)
        same = sum(a == b for a, b in zip(r_full.canvas, r_cached.canvas, strict=True))
        print(
            f"   {mode} cache: {r_cached.wall_s:7.1f} s  ({r_cached.ms_per_pass:.0f} ms/pass), speed-up "
            f"{r_full.wall_s / r_cached.wall_s:.2f}x (target >= 3x); greedy tokens agreeing: {same}/256 "
            f"({same / 256:.0%}); identical text: {r_full.canvas == r_cached.canvas}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--budget-s", type=float, default=45.0, help="cut a single draft after this long")
    parser.add_argument("--sizes", type=int, nargs="+", default=[64, 128, 256, 512])
    parser.add_argument("--skip-cache", action="store_true", help="skip part 3")
    parser.add_argument("--only-cache", action="store_true", help="run part 3 alone")
    parser.add_argument("--torch", action="store_true", help="also run part 4 (the torch backend)")
    parser.add_argument("--only-torch", action="store_true", help="run part 4 alone")
    args = parser.parse_args()
    if args.only_torch:
        print(f"machine: {describe_machine()}")
        torch_caches()
        return
    source = resolve_model("smollm2-135m-instruct").path
    llada_path = write_stand_in(source, OUT / "smollm2-llada.gguf", arch="llada", causal=False)
    cacheable_path = write_stand_in(source, OUT / "smollm2-cacheable.gguf", arch="llama", causal=False)
    print(f"machine: {describe_machine()}")
    print(f"models: {source.name} (AR) and its diffusion-form stand-ins (same weights, not trained for diffusion)")
    ar = LlamaAREngine(source, settings=LlamaSettings(n_ctx=1024))
    full = DiffusionEngine(LlamaDiffusionBackend(llada_path, DiffusionLoadSettings(n_ctx=1024)), "llada")
    if not args.only_cache:
        table_sizes(args, ar, full)
    if not args.skip_cache:
        caches(args, cacheable_path)
    if args.torch:
        torch_caches()


class _AgreementProbe:
    """Answers each pass from the cached backend; asks the full-recompute backend the same question."""

    def __init__(self, cached: TorchDiffusionBackend, full: TorchDiffusionBackend) -> None:
        self.cached, self.full = cached, full
        self.agreeing = self.compared = 0
        self.mask_token_id, self.eos_token_ids = cached.mask_token_id, cached.eos_token_ids
        self.vocab_size, self.context_length = cached.vocab_size, cached.context_length
        self.cache_mode, self.foreground = cached.cache_mode, cached.foreground
        self.block_causal = cached.block_causal
        self.piece, self.decode = cached.piece, cached.decode

    def reset(self, cache: bool = True, block_length: int = 0, suffix: bool = False) -> CacheMode:
        return self.cached.reset(cache, block_length, suffix)

    def logits(self, sequence: np.ndarray, start: int, end: int, stable: int) -> np.ndarray:
        answer = self.cached.logits(sequence, start, end, stable)
        masked = sequence[start:end] == self.mask_token_id
        reference = self.full.logits(sequence, start, end, stable)
        self.agreeing += int((answer.argmax(1) == reference.argmax(1))[masked].sum())
        self.compared += int(masked.sum())
        return answer


def torch_caches() -> None:
    from hf_stand_in import dream_from_smollm2, llada_from_sharpen_draft

    settings = DiffusionSettings.reference(steps=64, block_length=32, stop_at_eos=False)
    smollm2 = dream_from_smollm2(resolve_model("smollm2-135m-instruct").path, OUT / "smollm2-dream-hf")
    trained = llada_from_sharpen_draft(resolve_model("sharpen-draft").path, OUT / "sharpen-draft-llada-hf")
    document = DOCUMENTS.read_text().split("===\n")[0]
    for label, folder, n_ctx in (
        ("135M stand-in (Dream layout)", smollm2, 1024),
        ("sharpen-draft (LLaDA)", trained, 512),
    ):
        backends = {
            cache: TorchDiffusionBackend(folder, DiffusionLoadSettings(cache=cache, n_ctx=n_ctx))
            for cache in ("none", "prefix", "dual")
        }
        full = backends["none"]
        # The stand-in gets a long prompt (what a prefix cache is for); the 512-token model an instruction.
        long_prompt = n_ctx >= 1024
        prompt = full.tokenize(document, add_bos=True)[:200] if long_prompt else full.instruction_tokens(INSTRUCTION)
        print(
            f"\n4. Torch backend, {label}, {full.device.type} {full.loaded.dtype}, "
            f"{torch.get_num_threads()} threads: "
            f"prompt {len(prompt)}, N=256, blocks of 32, K=64"
        )
        runs = {
            cache: run_draft(DiffusionEngine(b, cache), prompt, 256, settings, 10_000.0)
            for cache, b in backends.items()
        }
        print("    cache |  wall s |  ms/pass | speed-up | final canvas | pass by pass")
        for cache, run in runs.items():
            same = sum(a == b for a, b in zip(run.canvas, runs["none"].canvas, strict=True))
            per_pass = "-"
            if cache != "none":
                probe = _AgreementProbe(backends[cache], full)
                for _ in DiffusionSampler(probe).generate(prompt, 256, settings):
                    pass
                per_pass = f"{probe.agreeing / probe.compared:.1%}"
            print(
                f"   {cache:>6} | {run.wall_s:>7.1f} | {run.ms_per_pass:>8.0f} | "
                f"{runs['none'].wall_s / run.wall_s:>7.2f}x | {same:>8}/256 | {per_pass:>12}"
            )
    print("   target: prefix cache at least 2x fewer wall-seconds than full recompute")


if __name__ == "__main__":
    main()
