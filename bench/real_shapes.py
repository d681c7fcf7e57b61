"""What AR decoding and diffusion drafting cost at the catalogue's real model shapes on this machine, beside the
router's estimates for them, made without measuring them.

The shapes are the models' own (their config.json on the Hub), written with random weights in the types a
user gets (bench/shape_gguf.py; the real vocabulary, SmolLM2's tokenizer padded to its size), into a temporary
folder that is deleted afterwards:

- Qwen2.5-0.5B-Instruct (AR; the catalogue's Q4_K_M): 24 layers, width 896, 14 heads (2 for keys and
  values), feed-forward 4864, vocabulary 151936, tied embeddings.
- Fast-dLLM v2 1.5B, Qwen2.5-1.5B's shape: 28 layers, width 1536, 12 heads (2), feed-forward 8960, 151936,
  tied; Q8_0, what `sharpen models convert` writes for it. Blocks of 32 under the block cache.
- SDAR-1.7B-Chat, Qwen3-1.7B's shape: 28 layers, width 2048, 16 heads (8), feed-forward 6144, 151936, tied;
  Q8_0. Blocks of 4 under the block cache.
- SDAR-4B-Chat, Qwen3-4B's: 36 layers, width 2560, 32 heads (8), feed-forward 9728, 151936, tied; Q8_0.
- LLaDA-8B-Instruct (its cacheable twin, a llama model): 32 layers, width 4096, 32 heads (32), feed-forward
  12288, vocabulary 126464, an output matrix of its own; the catalogue's Q4_K_M. Blocks of 32, dual cache.
- Dream-v0-Instruct-7B, Qwen2.5-7B's shape: 28 layers, width 3584, 28 heads (4), feed-forward 18944,
  vocabulary 152064, its own output matrix; Q4_K_M. Blocks of 32, dual cache.

The 4B, 7B and 8B shapes are written with a few of their layers at the real width (--cut-layers, 2 and 10 by
default; the quantizer's layer rule counts the real model's layers, so the cut files keep its mix of types),
and every time measured at both is scaled per layer to the real count: time(L) = time(a) + (time(b) - time(a))
x (L - a) / (b - a). Said so beside each of their rows. The two files are timed in turn, pass by pass and AR
draft by AR draft, so that a slow spell of the machine falls on both alike rather than on the difference that
is scaled up (at 2 and 6 layers, 7.5 times, and an 8B AR token read 105 to 212 ms from run to run).

Per shape, on the AR file and the diffusion file (the same weights, causal and bidirectional), after a
192-token prompt: one AR token (the AR engine's own loop, with the no-repeat rule drafts run under; the
fastest of three 256-token runs); one
refining pass of b = 4 to 64 rows under each cache mode (none: the prompt and the canvas re-decoded; dual,
and prefix at the canvas's last block, which decode the same rows: the window against the cached positions;
block: the block against the settled blocks); a 256-token draft at the model's published tokens per pass
(fixed passes K = 256 / that, greedy, under the model's cache and block length, Sharpen's sampler with its
default rules) against 256 AR tokens.

Published tokens per pass, and where they come from:
- Fast-dLLM v2: 2.5. Its authors report 2.54x the throughput of Qwen2.5-7B-Instruct at batch size 1 on an
  A100 (https://nvlabs.github.io/Fast-dLLM/v2, arXiv 2509.26328), where a pass over a sub-block costs about
  one AR step; taken as 2.5 tokens a pass.
- SDAR: 2. Its README (https://github.com/JetAstra/SDAR, "Efficiency"): dynamic-threshold decoding runs over
  2x faster than static decoding, which commits one token a pass (block_length = denoising_steps = 4).
- LLaDA-8B-Instruct: 1. Its authors decode with as many steps as tokens (steps = gen_length); dParallel
  (arXiv 2509.26488) names 256 steps for its 256-token GSM8K answers as LLaDA's baseline.
- Dream-v0-Instruct-7B: 1. Its model card's example decodes with steps = max_new_tokens.

Each row also gives the router's estimate: the embedded pair calibrated first in this run (as `sharpen
calibrate` measures it) and scaled to the shape by its file's work (router/profile.py scaled_ar and
scaled_diffusion, router/kernel_costs.py), never from a measurement of that shape. --profile reads a saved
calibration instead. The load other processes put on the CPU is watched through each shape and printed.
`--save-times` writes the measured times to a JSON file, and `--times` reads them back instead of measuring:
the same measurements estimated again by a changed cost model (with `--profile`, the same calibration).
`--kernels` measures the per-type kernel costs that router/kernel_costs.py holds (four-layer probes of each
type at widths 2048 and 896).
Timings only: the weights are noise. One llama.cpp job at a time: run it on an idle machine.

    .venv/bin/python bench/real_shapes.py [--shapes qwen2.5-0.5b,fast-dllm-v2-1.5b,sdar-1.7b,llada-8b]
        [--cut-layers 2,10] [--profile calibration.toml] [--kernels] [--save-times times.json]
        [--times times.json --profile calibration.toml]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np
from machine import describe_machine
from shape_gguf import Shape, tensors, write_shape
from stand_in import qwen2_biases, qwen3_norms

from app.service import SharpenService
from app.storage.config import load_config
from app.storage.paths import SharpenPaths
from engines.ar_engine import Sampling
from engines.cancel import NEVER_CANCELLED
from engines.diffusion.backend import CacheMode
from engines.diffusion.engine import DiffusionEngine
from engines.diffusion.llama_backend import LlamaDiffusionBackend
from engines.diffusion.load_settings import DiffusionLoadSettings
from engines.diffusion.settings import DiffusionSettings
from engines.events import DiffusionStats, Done, GenerationStats
from engines.llama_ar import LlamaAREngine, LlamaSettings
from models.catalogue import resolve_model
from models.tensor_mix import TensorMix, mix_of
from router.cost import cached_pass_seconds, estimate_ar, estimate_diffusion, pass_seconds
from router.cost_measurement import CalibrationSizes
from router.machine_load import under_load, watch
from router.profile import CostProfile, ModelSize, load_profile, scaled_ar, scaled_diffusion
from router.request import DiffusionPlan

PROMPT_TOKENS, DRAFT_TOKENS = 192, 256  # the prompt: whole blocks of every size measured
ROWS = (4, 8, 16, 32, 64)
# The cache modes whose passes differ: prefix at the canvas's last block decodes what dual does.
MODES: tuple[CacheMode, ...] = ("none", "dual", "block")
NO_REPEAT_NGRAM = 3  # chat.no_repeat_ngram's default: AR drafts run with it


@dataclass(frozen=True)
class Drafting:
    """How the model drafts, as its authors publish it: tokens per pass, its block length and cache."""

    tokens_per_pass: float
    block_length: int
    cache: CacheMode

    @property
    def passes(self) -> int:
        return math.ceil(DRAFT_TOKENS / self.tokens_per_pass)


@dataclass(frozen=True)
class ShapeRun:
    label: str
    shape: Shape
    file_type: str
    drafting: Drafting | None  # None: an AR model only
    cut: bool = False  # written with a few layers, scaled per layer


QWEN25_05B = Shape("Qwen2.5-0.5B", "qwen2", 151936, 896, 24, 14, 2, 64, 4864, True, True, qwen2_biases)
QWEN25_15B = Shape("Qwen2.5-1.5B", "qwen2", 151936, 1536, 28, 12, 2, 128, 8960, True, True, qwen2_biases)
QWEN3_17B = Shape("Qwen3-1.7B", "qwen3", 151936, 2048, 28, 16, 8, 128, 6144, True, False, qwen3_norms)
QWEN3_4B = Shape("Qwen3-4B", "qwen3", 151936, 2560, 36, 32, 8, 128, 9728, True, False, qwen3_norms)
LLADA_8B = Shape("LLaDA-8B", "llama", 126464, 4096, 32, 32, 32, 128, 12288, False, False, None, 500_000.0)
QWEN25_7B = Shape("Qwen2.5-7B", "qwen2", 152064, 3584, 28, 28, 4, 128, 18944, False, True, qwen2_biases)
SHAPES = {
    "qwen2.5-0.5b": ShapeRun("Qwen2.5-0.5B-Instruct", QWEN25_05B, "Q4_K_M", None),
    "fast-dllm-v2-1.5b": ShapeRun("Fast-dLLM v2 1.5B", QWEN25_15B, "Q8_0", Drafting(2.5, 32, "block")),
    "sdar-1.7b": ShapeRun("SDAR-1.7B-Chat", QWEN3_17B, "Q8_0", Drafting(2.0, 4, "block")),
    "sdar-4b": ShapeRun("SDAR-4B-Chat", QWEN3_4B, "Q8_0", Drafting(2.0, 4, "block"), cut=True),
    "llada-8b": ShapeRun("LLaDA-8B-Instruct", LLADA_8B, "Q4_K_M", Drafting(1.0, 32, "dual"), cut=True),
    "dream-7b": ShapeRun("Dream-v0-Instruct-7B", QWEN25_7B, "Q4_K_M", Drafting(1.0, 32, "dual"), cut=True),
}
DEFAULT_SHAPES = "qwen2.5-0.5b,fast-dllm-v2-1.5b,sdar-1.7b,llada-8b"


@dataclass
class Measured:
    """One file's times, in seconds."""

    ar_token: float = 0.0
    ar_draft: float = 0.0  # 256 tokens after the prompt
    passes: dict[tuple[CacheMode, int], float] | None = None
    draft: float = 0.0
    load: float = 0.0  # cores other processes kept busy meanwhile


def ar_times(paths: list[Path], prompt: list[int], rounds: int = 3) -> list[tuple[float, float]]:
    """For each file, one token's time and 256 tokens' after the prompt, through the AR engine's own loop: the
    fastest of `rounds`, the files taken in turn (a cut shape's two side by side, as their passes are)."""
    engines = [LlamaAREngine(path, path.stem, LlamaSettings(n_ctx=1024)) for path in paths]
    sampling = Sampling(no_repeat_ngram=NO_REPEAT_NGRAM)
    for engine in engines:
        for _ in engine._generate(list(prompt), 0, 8, (), sampling, NEVER_CANCELLED):  # warm: first calls are slow
            pass
    best = [(math.inf, math.inf) for _ in engines]
    for _ in range(rounds):
        for i, engine in enumerate(engines):
            engine.forget_cache()
            done = None
            for done in engine._generate(list(prompt), 0, DRAFT_TOKENS, (), sampling, NEVER_CANCELLED):  # noqa: B007
                pass
            assert isinstance(done, Done) and isinstance(done.stats, GenerationStats)
            stats = done.stats
            assert stats.time_to_first_token_s is not None and stats.generated_tokens > 1
            per_token = (stats.total_s - stats.time_to_first_token_s) / (stats.generated_tokens - 1)
            # A random model that wrote end-of-text early: its 256 tokens at the rate it wrote.
            best[i] = min(best[i], (per_token, stats.time_to_first_token_s + per_token * (DRAFT_TOKENS - 1)))
    return best


def pass_times(
    paths: list[Path], prompt: list[int], mode: CacheMode, repeats: int = 5
) -> list[dict[tuple[CacheMode, int], float]]:
    """One refining pass of each row count under `mode` (the fastest of `repeats`, as the calibration takes a
    block's pass: these shared machines run in spells of seconds up to 25% slower), for each file, the files'
    passes taken in turn: a cut shape's two files side by side, so that a slow spell falls on both alike rather
    than on the difference that is scaled up to the real layer count."""
    times: list[dict[tuple[CacheMode, int], float]] = [{} for _ in paths]
    backends = [LlamaDiffusionBackend(path, DiffusionLoadSettings(n_ctx=1024, cache=mode)) for path in paths]
    for backend in backends:
        assert backend.cache_mode == mode, backend.cache_note
        # A file's first passes after loading run slow (its weights paged in): the 4-row pass measured first
        # had read slower than the 16-row one.
        warm = np.array([*prompt, *[backend.mask_token_id] * max(ROWS)])
        for _ in range(2):
            backend.reset(cache=True, block_length=max(ROWS))
            backend.logits(warm, len(prompt), len(warm), 0)
    for rows in ROWS:
        sequences = []
        for backend in backends:
            sequence = np.array([*prompt, *[backend.mask_token_id] * rows])
            backend.reset(cache=True, block_length=rows)
            backend.logits(sequence, len(prompt), len(sequence), 0)  # fills the cache (and warms up)
            sequences.append(sequence)
        took: list[list[float]] = [[] for _ in paths]
        for _ in range(repeats):
            for backend, sequence, seconds in zip(backends, sequences, took, strict=True):
                start = time.perf_counter()
                backend.logits(sequence, len(prompt), len(sequence), 0)
                seconds.append(time.perf_counter() - start)
        for file_times, seconds in zip(times, took, strict=True):
            file_times[mode, rows] = min(seconds)
    return times


def draft_time(path: Path, prompt: list[int], drafting: Drafting) -> float:
    backend = LlamaDiffusionBackend(path, DiffusionLoadSettings(n_ctx=1024, cache=drafting.cache))
    engine = DiffusionEngine(backend, path.stem)
    # Sharpen's own sampler and rules as a user's draft runs them, at the published passes.
    settings = DiffusionSettings(steps=drafting.passes, block_length=drafting.block_length, stop_at_eos=False)
    for _ in engine.sampler.generate(prompt, drafting.block_length, replace(settings, steps=1)):
        pass  # the sampler reads the vocabulary's text once per model, before a user's first draft ends
    done = None
    for done in engine.sampler.generate(prompt, DRAFT_TOKENS, settings):  # noqa: B007
        pass
    assert isinstance(done, Done) and isinstance(done.stats, DiffusionStats)
    return done.stats.working_s


def measure(run: ShapeRun, folder: Path, tokenizer: Path, cuts: list[int | None], prompt: list[int]) -> list[Measured]:
    """The shape's times, written whole (`cuts` [None]) or at each layer count in `cuts`."""
    files = [write_shape(run.shape, run.file_type, folder, tokenizer, layers) for layers in cuts]
    watching = watch()
    measured = [Measured(passes={}) for _ in files]
    for m, times in zip(measured, ar_times([a for a, _ in files], prompt), strict=True):
        m.ar_token, m.ar_draft = times
    for mode in MODES:
        for m, passes in zip(measured, pass_times([d for _, d in files], prompt, mode), strict=True):
            assert m.passes is not None
            m.passes.update(passes)
    for m, (_, diffusion_path) in zip(measured, files, strict=True):
        if run.drafting is not None:
            m.draft = draft_time(diffusion_path, prompt, run.drafting)
    load = watching.others() or 0.0
    for m in measured:
        m.load = load
    for pair in files:
        for path in pair:
            path.unlink()
    return measured


def per_layer(a: Measured, b: Measured, layers: tuple[int, int], real: int) -> Measured:
    """Times scaled per layer from files of `layers` layers to the real count."""
    lo, hi = layers

    def scaled(x: float, y: float) -> float:
        return x + (y - x) * (real - lo) / (hi - lo)

    assert a.passes is not None and b.passes is not None
    return Measured(
        ar_token=scaled(a.ar_token, b.ar_token),
        ar_draft=scaled(a.ar_draft, b.ar_draft),
        passes={key: scaled(a.passes[key], b.passes[key]) for key in a.passes},
        draft=scaled(a.draft, b.draft),
        load=max(a.load, b.load),
    )


def save_times(path: Path, times: dict[str, Measured]) -> None:
    def plain(m: Measured) -> dict[str, object]:
        passes = [[mode, rows, seconds] for (mode, rows), seconds in (m.passes or {}).items()]
        return {
            "ar_token": m.ar_token,
            "ar_draft": m.ar_draft,
            "passes": passes,
            "draft": m.draft,
            "load": m.load,
        }

    path.write_text(json.dumps({name: plain(m) for name, m in times.items()}, indent=1))


def load_times(path: Path) -> dict[str, Measured]:
    def measured(raw: dict[str, Any]) -> Measured:
        passes = {(mode, int(rows)): float(seconds) for mode, rows, seconds in raw["passes"]}
        return Measured(raw["ar_token"], raw["ar_draft"], passes, raw["draft"], raw["load"])

    return {name: measured(raw) for name, raw in json.loads(path.read_text()).items()}


def embedded_service() -> SharpenService:
    """Sharpen on its defaults (the embedded pair), in a home of its own."""
    paths = SharpenPaths.under(Path(tempfile.mkdtemp(prefix="sharpen-shapes-")))
    return SharpenService(load_config(paths.config_file), paths)


def calibration(profile_path: Path | None, service: SharpenService) -> CostProfile:
    """The embedded pair measured as `sharpen calibrate` measures it (or a saved profile)."""
    if profile_path is not None:
        profile, warning = load_profile(profile_path, "cpu")
        if warning:
            raise SystemExit(warning)
        return profile
    profile = service.calibrations.calibrate(CalibrationSizes(), lambda _fraction, _label: None)
    print(f"calibration saved in {service.routing.profile_path} (--profile reads it again)")
    return profile


def full_mix(run: ShapeRun) -> TensorMix:
    """The mix of the shape's whole file, from the tensors it would be written with (its real layer count)."""
    shape = run.shape
    specs = tensors(shape, run.file_type, shape.layers)
    return mix_of(((s.name, s.shape, s.kind.name) for s in specs), shape.layers, shape.width, shape.vocab)


@dataclass(frozen=True)
class Row:
    what: str
    measured: float
    estimate: float

    @property
    def ratio(self) -> float:
        return self.estimate / self.measured if self.measured > 0 else float("nan")

    def line(self) -> str:
        flag = "" if within(self.ratio) else " **off**"
        return f"| {self.what} | {fmt(self.measured)} | {fmt(self.estimate)} | {self.ratio:.2f}{flag} |"


def within(ratio: float) -> bool:
    return 0.75 <= ratio <= 1.25


def fmt(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms" if seconds < 1 else f"{seconds:.2f} s"


def rows_for(run: ShapeRun, measured: Measured, profile: CostProfile) -> list[Row]:
    mix = full_mix(run)
    size = ModelSize(run.label, mix.total, 0, "none", mix, int(run.shape.shift))
    ar_costs = scaled_ar(profile.ar, size)
    assert ar_costs is not None, "the calibration recorded the embedded models' work"
    # The measured token is the mean over the 256 after the prompt: estimated at their middle one's context.
    ar_token = ar_costs.token_seconds(PROMPT_TOKENS + DRAFT_TOKENS / 2)
    rows = [Row("one AR token", measured.ar_token, ar_token)]
    assert measured.passes is not None
    for mode in MODES:
        costs = scaled_diffusion(profile.diffusion, replace(size, cache=mode), "cpu")
        assert costs is not None
        for b in ROWS:
            # Re-decoded: every row in one batch; cached: b rows against the prompt's keys and values.
            if mode == "none":
                estimate = pass_seconds(PROMPT_TOKENS + b, costs)
            elif mode == "dual":
                estimate = cached_pass_seconds(b, costs, PROMPT_TOKENS)
            else:
                estimate = pass_seconds(b, costs, PROMPT_TOKENS)
            what = {"none": "prompt + canvas re-decoded", "dual": "dual / prefix", "block": "block"}[mode]
            rows.append(Row(f"pass of {b} rows, {what}", measured.passes[mode, b], estimate))
    drafting = run.drafting
    ar_256 = estimate_ar(DRAFT_TOKENS, PROMPT_TOKENS, ar_costs).seconds
    rows.append(Row(f"{DRAFT_TOKENS} AR tokens after the prompt", measured.ar_draft, ar_256))
    if drafting is not None:
        costs = scaled_diffusion(profile.diffusion, replace(size, cache=drafting.cache), "cpu")
        assert costs is not None
        plan = DiffusionPlan(drafting.passes, drafting.block_length, None, "blocks")
        estimate = estimate_diffusion(DRAFT_TOKENS, PROMPT_TOKENS, 0, plan, costs).seconds
        what = (
            f"{DRAFT_TOKENS}-token draft, {drafting.tokens_per_pass:g} tokens a pass ({drafting.passes} passes), "
            f"{drafting.cache} cache, blocks of {drafting.block_length}"
        )
        rows.append(Row(what, measured.draft, estimate))
    return rows


def print_shape(run: ShapeRun, measured: Measured, profile: CostProfile, cut: tuple[int, int] | None) -> list[Row]:
    shape = run.shape
    mix = full_mix(run)
    print(
        f"\n### {run.label}: {shape.label}'s shape ({shape.layers} layers, width {shape.width}, vocabulary "
        f"{shape.vocab}), {run.file_type}, {mix.total / 1e9:.2f}B matrix parameters"
    )
    if cut is not None:
        print(
            f"Written with {cut[0]} and {cut[1]} of its layers at the real width; times scaled per layer to "
            f"{shape.layers}."
        )
    busy = " (under load: read with care)" if under_load(measured.load) else ""
    print(f"Other processes kept {measured.load:.2f} cores busy meanwhile{busy}.\n")
    print("| measured | time | the router's estimate | estimate / measured |")
    print("|---|---|---|---|")
    rows = rows_for(run, measured, profile)
    for row in rows:
        print(row.line())
    if run.drafting is not None:
        speed = measured.ar_draft / measured.draft
        estimated = rows[-2].estimate / rows[-1].estimate
        print(f"\nThe draft at {speed:.2f}x AR's speed (estimated {estimated:.2f}x).")
    return rows


KERNEL_ROWS = (1, 2, 4, 6, 8, 16, 32, 48, 64)


@dataclass(frozen=True)
class ProbeCosts:
    """A probe's seconds per matrix parameter: one row's pass, and two lines (each further row's cost, and a
    batched pass's fixed part) through 2 to 6 rows and through 16 to 64 rows; and an 8-row pass over a 16-row one."""

    decode: float
    few: statistics.LinearRegression
    many: statistics.LinearRegression
    eight_over_sixteen: float


def line_through(cost: dict[int, float], rows: tuple[int, ...], parameters: int) -> statistics.LinearRegression:
    """The line through the passes of `rows` rows, per matrix parameter."""
    return statistics.linear_regression(rows, [cost[b] / parameters for b in rows])


def kernels(folder: Path, tokenizer: Path) -> None:
    """Per-type kernel costs on four-layer probes, relative to Q8_0 at width 2048, per matrix parameter: one
    row's pass (decode), and two lines, each further row's cost (row) and a batched pass's fixed part (batch):
    through 2 to 6 rows, and through 16 to 64 rows. Types that the tiled kernels take from 8 rows (on a CPU
    without AMX) cost per row much less on the second line, have a larger fixed part, and an 8-row pass
    costing what a 16-row one does (the last column); the second line gives their TiledCost."""
    import llama_cpp
    from block_diffusion import row_costs

    prompt = [int(t) for t in np.random.default_rng(1).integers(100, 40000, PROMPT_TOKENS)]
    cases = [(2048, t) for t in ("Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q4_K", "Q5_K", "Q6_K", "F16", "BF16")]
    cases += [(896, t) for t in ("Q8_0", "Q4_0", "Q4_1", "Q5_0", "F16", "BF16")]
    results: dict[tuple[int, str], ProbeCosts] = {}
    for width, kind in cases:
        shape = Shape(f"probe{width}", "llama", 49152, width, 4, width // 64, width // 64, 64, 3 * width, True, False)
        path = write_shape(shape, kind, folder, tokenizer)[0]
        llama = llama_cpp.Llama(str(path), n_ctx=512, n_batch=512, verbose=False)
        runs = [row_costs(llama, prompt, repeats=3, sizes=KERNEL_ROWS) for _ in range(3)]
        del llama
        cost = {b: min(r[b] for r in runs) for b in KERNEL_ROWS}
        parameters = full_mix(ShapeRun("probe", shape, kind, None)).total
        few = line_through(cost, (2, 4, 6), parameters)
        many = line_through(cost, (16, 32, 48, 64), parameters)
        results[width, kind] = ProbeCosts(cost[1] / parameters, few, many, cost[8] / cost[16])
        print(f"{width} {kind}: " + " ".join(f"{b}:{cost[b] * 1000:.1f}" for b in KERNEL_ROWS) + " ms by rows")
    unit = results[2048, "Q8_0"]
    row, batch = unit.many.slope, unit.many.intercept  # Q8_0's line through 16 to 64 rows: the unit
    print("\n| type | width | decode | row, 2-6 | batch, 2-6 | row, 16-64 | batch, 16-64 | 8 rows / 16 rows |")
    print("|---|---|---|---|---|---|---|---|")
    for (width, kind), probe in results.items():
        few, many = probe.few, probe.many
        lines = (few.slope / row, few.intercept / batch, many.slope / row, many.intercept / batch)
        cells = " | ".join(f"{x:.2f}" for x in (probe.decode / unit.decode, *lines))
        print(f"| {kind} | {width} | {cells} | {probe.eight_over_sixteen:.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shapes", default=DEFAULT_SHAPES, help=f"of {', '.join(SHAPES)}")
    parser.add_argument("--cut-layers", default="2,10", help="the layer counts a cut shape is written with")
    parser.add_argument("--profile", type=Path, help="a saved calibration of the embedded pair")
    parser.add_argument("--kernels", action="store_true", help="measure the per-type kernel costs instead")
    parser.add_argument("--save-times", type=Path, help="write the measured times to this JSON file")
    parser.add_argument(
        "--times", type=Path, help="the times a --save-times run wrote: estimate them again (with its --profile)"
    )
    args = parser.parse_args()
    print(f"machine: {describe_machine()}")
    tokenizer = resolve_model("smollm2-135m-instruct").path
    with tempfile.TemporaryDirectory(prefix="sharpen-shapes-") as temporary:
        folder = Path(temporary)
        if args.kernels:
            kernels(folder, tokenizer)
            return
        names = args.shapes.split(",")
        chosen = [SHAPES[name] for name in names]
        service = embedded_service()
        prompt = [int(t) for t in np.random.default_rng(1).integers(100, 40000, PROMPT_TOKENS)]
        saved = load_times(args.times) if args.times else {}
        profile = calibration(args.profile, service)
        ar, diffusion = profile.ar, profile.diffusion
        print(
            f"calibration of the embedded pair: AR {ar.model} {ar.seconds_per_token * 1000:.2f} ms a token "
            f"+ {ar.seconds_per_context_token * 1e6:.2f} us a position of context, "
            f"{ar.prompt_tokens_per_s:.0f} prompt tokens/s; {diffusion.model} ({diffusion.cache} cache) a pass "
            f"{diffusion.pass_base_s * 1000:.1f} ms + {diffusion.pass_s_per_position * 1000:.2f} ms a position, "
            f"+ {diffusion.pass_s_per_context * 1e6:.1f} us + {diffusion.pass_s_per_row_context * 1e6:.2f} us a row "
            f"per position of cached context, "
            f"sampler {diffusion.sampler_s_per_row * 1000:.2f} ms a row; "
            f"{'under load' if profile.measured_under_load else 'idle'} ({profile.load.others_during:.2f} cores)"
        )
        cut = tuple(int(n) for n in args.cut_layers.split(","))
        assert len(cut) == 2 and cut[0] < cut[1]
        worst: list[tuple[str, Row]] = []
        for name, run in zip(names, chosen, strict=True):
            started = time.perf_counter()
            if name in saved:
                measured = saved[name]
            elif run.cut:
                a, b = measure(run, folder, tokenizer, [cut[0], cut[1]], prompt)
                measured = per_layer(a, b, (cut[0], cut[1]), run.shape.layers)
            else:
                (measured,) = measure(run, folder, tokenizer, [None], prompt)
            saved[name] = measured
            if args.save_times:
                save_times(args.save_times, saved)
            rows = print_shape(run, measured, profile, (cut[0], cut[1]) if run.cut else None)
            worst += [(run.label, row) for row in rows]
            print(f"({time.perf_counter() - started:.0f} s)")
        off = [(label, row) for label, row in worst if not within(row.ratio)]
        print(f"\n{len(worst) - len(off)} of {len(worst)} estimates within 25% of the measured times")
        for label, row in off:
            print(f"  off: {label}, {row.what}: {row.ratio:.2f}")


if __name__ == "__main__":
    main()
