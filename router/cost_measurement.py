"""Measure the installed engines on this machine and turn the figures into a cost profile.

Both engines are measured in one run, their measurements interleaved, so that whatever else the machine is
doing falls on both alike; and the CPU is watched before and during the run (router/machine_load.py), so a
profile measured under load says so.
"""

from __future__ import annotations

import contextlib
import math
import platform
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

import numpy as np

from engines.ar_engine import AREngine
from engines.cancel import CancelToken
from engines.diffusion.engine import DiffusionEngine
from engines.diffusion.settings import DiffusionSettings
from engines.events import DiffusionStats, Done, Event, GenerationStats, Token
from engines.threads import available_cores
from models.errors import ModelFileError
from models.tensor_mix import read_tensor_mix
from router.cost import estimate_diffusion, sampled_rows
from router.kernel_costs import machine_table
from router.machine_load import WATCH_S, others_over, under_load, watch
from router.profile import ArCosts, CostProfile, DeviceClass, DiffusionCosts, MeasuredLoad, default_profile
from router.request import DiffusionPlan

Progress = Callable[[float, str], None]
# One measurement: what the progress bar says, and the work.
Step = tuple[str, Callable[[], None]]


class CalibrationCancelled(Exception):
    """The calibration was cancelled (a draft started); nothing was saved."""


PROMPT_TEXT = (
    "Thank you for the detailed notes from yesterday's planning meeting. I went through the list of open "
    "questions this morning and I think we can close most of them before the end of the week. "
)
INSTRUCTION = "Write a short email to a colleague about moving our weekly meeting to Thursday."
# Fast-dLLM's confidence threshold, measured where the user set none.
THRESHOLD = 0.9
# Rows of the passes measured for block-causal decoding (its passes decode one block each), after contexts
# of CONTEXT_TOKENS cached positions (whole blocks of every size), as a draft's passes run: a pass's cost
# grows with the context it attends to. Three contexts, far apart, so that noise moves little cost between a
# pass's fixed part, its rows and its context (context_line).
BLOCK_ROWS = (4, 8, 16, 32, 64)
CONTEXT_TOKENS = (64, 384, 768)
# A block's pass is timed this many times against each settled context, and its fastest timing kept: it costs
# milliseconds where settling the context costs tenths of a second, and a shared machine runs in spells of a
# few seconds up to 25% slower (the embedded drafter's 64-row pass, idle: 119-125 ms, then 147-152 ms), which
# one timing a round lands in or not. The draft measured after the passes sets the level drafts run at.
BLOCK_PASS_TIMINGS = 5
# AR's tokens are timed after the calibration's prompt and after this share of it.
SHORT_PROMPT_SHARE = 8


@dataclass(frozen=True)
class CalibrationSizes:
    prompt_tokens: int = 256
    decode_tokens: int = 64
    canvas_sizes: tuple[int, ...] = (64, 128, 256)
    threshold_tokens: int = 64
    repeats: int = 3
    context_tokens: tuple[int, ...] = CONTEXT_TOKENS


# Before a first draft (router.auto_calibrate), which waits for it: two contexts, each settled once per size.
QUICK = CalibrationSizes(
    prompt_tokens=64, decode_tokens=16, canvas_sizes=(16, 32), threshold_tokens=32, repeats=1, context_tokens=(64, 384)
)


def _done(events: Iterable[Event]) -> Done:
    last = None
    for last in events:  # noqa: B007
        pass
    assert isinstance(last, Done)
    return last


class _ArMeasurement:
    """AR's prompt rate (a cold prompt) and time per token (generation after a long prompt and after a short one:
    a token's attention grows with its context), once per repeat."""

    def __init__(self, engine: AREngine, sizes: CalibrationSizes) -> None:
        self.engine, self.sizes = engine, sizes
        text = (PROMPT_TEXT * (sizes.prompt_tokens // 30 + 2))[: sizes.prompt_tokens * 5]
        self.prompt = engine.leading_text(text, sizes.prompt_tokens)
        self.short_tokens = max(1, sizes.prompt_tokens // SHORT_PROMPT_SHARE)
        self.short_prompt = engine.leading_text(text, self.short_tokens)
        self.rates: list[float] = []
        # Per prompt, (the context a token attended to, its time): each run's median gap, at its middle token
        # (the fastest run's kept).
        self.per_token: dict[int, list[tuple[float, float]]] = {}

    def rounds(self) -> list[list[Step]]:
        """One round per repeat: a cold prompt, then tokens after it, then tokens after a short prompt."""
        return [
            [
                ("AR: prompt evaluation", self._prompt),
                ("AR: token generation", self._tokens(self.prompt, self.sizes.prompt_tokens)),
                ("AR: token generation after a short prompt", self._tokens(self.short_prompt, self.short_tokens)),
            ]
            for _ in range(self.sizes.repeats)
        ]

    def _prompt(self) -> None:
        self.engine.forget_cache()
        cold = _done(self.engine.complete(self.prompt, max_tokens=1)).stats
        assert isinstance(cold, GenerationStats) and cold.time_to_first_token_s
        self.rates.append(cold.prompt_tokens / cold.time_to_first_token_s)

    def _tokens(self, prompt: str, prompt_tokens: int) -> Callable[[], None]:
        """The median gap between tokens after the first: a moment's work of another process stalls a token or
        two (llama.cpp's threads wait for each other at every layer), which the mean would spread over all
        of them. Seen on 2 cores: a profile watched at 0.21 busy cores measured 13.5 ms a token, 7.2 idle."""

        def timed() -> None:
            arrivals: list[float] = []
            last = None
            for last in self.engine.complete(prompt + " We", max_tokens=self.sizes.decode_tokens):
                if isinstance(last, Token):
                    arrivals.append(time.perf_counter())
            assert isinstance(last, Done) and isinstance(last.stats, GenerationStats)
            if len(arrivals) > 2:
                context = (last.stats.prompt_tokens or prompt_tokens) + len(arrivals) / 2
                self.per_token.setdefault(prompt_tokens, []).append((context, float(np.median(np.diff(arrivals)))))

        return timed

    def costs(self) -> ArCosts:
        per_token, per_context = token_line([_fastest_point(runs) for runs in self.per_token.values()])
        return ArCosts(
            model=self.engine.model_name,
            prompt_tokens_per_s=float(np.median(self.rates)),
            seconds_per_token=per_token,
            seconds_per_context_token=per_context,
        )


class DiffusionMeasurement:
    """Passes over several sizes (a line through them), then a draft under the user's settings: its passes per
    token, and what a pass inside a draft costs beyond the bare passes."""

    def __init__(self, engine: DiffusionEngine, sizes: CalibrationSizes, settings: DiffusionSettings) -> None:
        self.engine, self.sizes = engine, sizes
        backend = engine.backend
        mask = backend.mask_token_id
        self.block = backend.cache_mode == "block"
        if self.block:
            # A block-causal pass decodes one block against the settled ones: a few rows are what count.
            text = backend.tokenize(PROMPT_TEXT * (max(sizes.context_tokens) // 20), add_bos=True)
            self.passes = [
                (np.array([*text[:context], *[mask] * rows]), context)
                for context in sizes.context_tokens
                for rows in BLOCK_ROWS
            ]
        else:
            prompt = engine.draft_prompt(INSTRUCTION, max(sizes.canvas_sizes)).prompt
            self.passes = [(np.array([*prompt, *[mask] * n]), len(prompt)) for n in sizes.canvas_sizes]
        # (cached context, positions decoded, seconds): a full pass has no cached context.
        self.points: list[tuple[int, int, float]] = []
        # A draft as the user's settings run it, with their threshold or Fast-dLLM's 0.9: one a round.
        self.settings = replace(settings, threshold=settings.threshold or THRESHOLD)
        self.drafts: list[DiffusionStats] = []

    def warm_up(self) -> None:
        """A loaded model's first passes run about twice as slow as a draft's (measured on the embedded drafter:
        41 ms + 5.1 ms a position cold, 19 ms + 3.3 warm): each size runs once untimed first. A short draft
        reads what the sampler reads once per model (the vocabulary's text, for its rules)."""
        self.warm_up_passes()
        _done(self.engine.draft(INSTRUCTION, 8, self.settings))

    def warm_up_passes(self) -> None:
        for sequence, first in self.passes:
            self._decode(sequence, first)

    def rounds(self) -> list[list[Step]]:
        """One round per repeat: each size untimed (passes right after an AR step ran 1.5x slower on the
        embedded drafter, for a few passes), then each size timed, then a draft."""
        return [
            [
                ("diffusion: warming up", self.warm_up_passes),
                *(
                    (f"diffusion: a pass over {len(seq)} positions", self._pass(seq, first))
                    for seq, first in self.passes
                ),
                self.draft_step(),
            ]
            for _ in range(self.sizes.repeats)
        ]

    def draft_step(self) -> Step:
        return f"diffusion: passes under threshold {self.settings.threshold}", self._draft

    def _decode(self, sequence: np.ndarray, first: int) -> None:
        """A pass over the sequence from `first` on: for the block cache, the context settled first (the
        block's pass against it is the next call's); for the others a full pass, whatever the cache."""
        backend = self.engine.backend
        if self.block:
            backend.reset(cache=True, block_length=len(sequence) - first)
        else:
            backend.reset(cache=False)
        backend.logits(sequence, first, len(sequence), 0)

    def _pass(self, sequence: np.ndarray, first: int) -> Callable[[], None]:
        def timed() -> None:
            backend = self.engine.backend
            if self.block:
                self._decode(sequence, first)  # settles the context; the block's pass alone is timed
                fastest = min(self._timed_logits(sequence, first) for _ in range(BLOCK_PASS_TIMINGS))
                self.points.append((first, len(sequence) - first, fastest))
            else:
                backend.reset(cache=False)
                self.points.append((0, len(sequence), self._timed_logits(sequence, first)))

        return timed

    def _timed_logits(self, sequence: np.ndarray, first: int) -> float:
        start = time.perf_counter()
        self.engine.backend.logits(sequence, first, len(sequence), 0)
        return time.perf_counter() - start

    def _draft(self) -> None:
        # Passes per token of the text it wrote (it stops at end-of-text, as drafts do); greedy, so each run
        # drafts the same text in the same passes.
        stats = _done(self.engine.draft(INSTRUCTION, self.sizes.threshold_tokens, self.settings)).stats
        assert isinstance(stats, DiffusionStats)
        self.drafts.append(stats)

    @property
    def stats(self) -> DiffusionStats | None:
        """The fastest draft: it sets the level every diffusion estimate carries, and this machine's slow states
        last minutes (two calibrations in a row, idle, read the drafter's 64-row pass at 118 and 146 ms at their
        fastest, AR's token at 6.8 and 7.2 ms), so the drafts are one a round, spread over the calibration,
        like the passes whose line they scale."""
        return min(self.drafts, key=lambda stats: stats.backend_s, default=None)

    def costs(self) -> DiffusionCosts:
        stats = self.stats
        assert stats is not None, "a draft step ran"
        line = replace(context_line(self.points), cache=self.engine.backend.cache_mode)
        passes_per_token = min(1.0, stats.passes / max(1, stats.generated_tokens))
        scaled = replace(line.slower(draft_scale(stats, self.settings, line)), model=self.engine.model_name)
        return replace(
            scaled,
            threshold_passes_per_token=passes_per_token,
            sampler_s_per_row=sampler_seconds_per_row(stats, self.settings),
        )


def _decoded(stats: DiffusionStats, settings: DiffusionSettings) -> int:
    """The canvas the draft decoded: where it stopped at end-of-text, the blocks after that one never were."""
    decoded = stats.canvas_tokens
    if stats.finish_reason == "eos" and settings.schedule == "blocks":
        block = settings.block_length
        decoded = min(decoded, math.ceil((stats.generated_tokens + 1) / block) * block)
    return decoded


def draft_scale(stats: DiffusionStats, settings: DiffusionSettings, line: DiffusionCosts) -> float:
    """What the draft's forward passes took over what the passes' line estimates for them: a pass inside a draft
    also pays the cache's bookkeeping (on the embedded drafter the bare passes alone put a 256-token draft at
    about half its time). The sampler's own time is apart (sampler_seconds_per_row)."""
    plan = DiffusionPlan(stats.passes, settings.block_length, None, settings.schedule)
    expected = estimate_diffusion(_decoded(stats, settings), stats.prompt_tokens, 0, plan, line).seconds
    took = stats.backend_s
    return took / expected if expected > 0 and took > 0 else 1.0


def sampler_seconds_per_row(stats: DiffusionStats, settings: DiffusionSettings) -> float:
    """The sampler's own time in the draft (everything but the forward passes), per row of logits it read."""
    plan = DiffusionPlan(stats.passes, settings.block_length, None, settings.schedule)
    rows = stats.passes * sampled_rows(_decoded(stats, settings), plan)
    return max(0.0, stats.working_s - stats.backend_s) / rows if rows else 0.0


def context_line(points: Sequence[tuple[int, int, float]]) -> DiffusionCosts:
    """The passes' line at no context, and its growth per position of context (per pass and per row): one plane
    through every context's passes, each (context, rows) at its fastest round, fitted to relative error (a 4-row
    pass is a fifth of a 64-row one, and what a pass's fixed part is carried by, router/profile.py). Growth that
    noise made negative counts as none, and the plane is fitted again without it."""
    contexts = sorted({context for context, _, _ in points})
    if len(contexts) < 2 or contexts[0] <= 0:
        base, per_position = _fit_line([(p, s) for _, p, s in points])
        return DiffusionCosts(pass_base_s=base, pass_s_per_position=per_position)
    fastest: dict[tuple[int, int], float] = {}
    for context, rows, seconds in points:
        fastest[context, rows] = min(seconds, fastest.get((context, rows), math.inf))
    keys = sorted(fastest)
    at_context = np.array([c for c, _ in keys], dtype=np.float64)
    at_rows = np.array([r for _, r in keys], dtype=np.float64)
    took = np.array([fastest[key] for key in keys], dtype=np.float64)
    terms: dict[str, np.ndarray] = {
        "base": np.ones_like(at_rows),
        "row": at_rows,
        "context": at_context,
        "row_context": at_rows * at_context,
    }
    while True:
        design = np.stack(list(terms.values()), axis=1) / took[:, None]
        fitted = np.linalg.lstsq(design, np.ones_like(took), rcond=None)[0]
        solved = {name: float(value) for name, value in zip(terms, fitted, strict=True)}
        negative = [name for name in ("context", "row_context") if name in solved and solved[name] < 0]
        if not negative:
            break
        for name in negative:
            del terms[name]
    if solved["base"] < 0 or solved["row"] <= 0:
        base, per_position = _fit_line([(r, s) for (c, r), s in fastest.items() if c == contexts[0]])
        return DiffusionCosts(pass_base_s=base, pass_s_per_position=per_position)
    return DiffusionCosts(
        pass_base_s=solved["base"],
        pass_s_per_position=solved["row"],
        pass_s_per_context=solved.get("context", 0.0),
        pass_s_per_row_context=solved.get("row_context", 0.0),
    )


def _fastest_point(runs: Sequence[tuple[float, float]]) -> tuple[float, float]:
    return float(np.mean([c for c, _ in runs])), min(s for _, s in runs)


def token_line(points: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """AR's time a token with no context and its growth per position of context, through (context, seconds)
    points; where noise tilts the line down (or below zero), the same time at every context."""
    if not points:
        return ArCosts().seconds_per_token, 0.0
    (short_context, short_s), (long_context, long_s) = min(points), max(points)
    if long_context > short_context and long_s > short_s:
        per_context = (long_s - short_s) / (long_context - short_context)
        if short_s - per_context * short_context > 0:
            return short_s - per_context * short_context, per_context
    return float(np.median([s for _, s in points])), 0.0


def _fit_line(points: Sequence[tuple[int, float]]) -> tuple[float, float]:
    """Least-squares seconds = base + slope x positions through each size's fastest round (a shared machine's
    noise only ever slows a pass: through the medians of three rounds, four calibrations in a row put the
    embedded drafter's line at 64 rows at 110 to 136 ms; through the fastest, three more at 112 ms), both kept
    non-negative (one slow pass of the largest size had tilted the line by half)."""
    sizes = sorted({p for p, _ in points})
    x = np.array(sizes, dtype=np.float64)
    y = np.array([min(s for p, s in points if p == size) for size in sizes], dtype=np.float64)
    if len(set(x)) < 2:
        return 0.0, float(y.mean() / x.mean())
    slope, base = np.polyfit(x, y, 1)
    if base < 0 or slope <= 0:
        # Noise (a busy machine) can tilt a line through a few points; cost per position is the safer read.
        return 0.0, float((y / x).mean())
    return float(base), float(slope)


Costs = TypeVar("Costs", ArCosts, DiffusionCosts)


def _with_work(costs: Costs, served: object) -> Costs:
    """`costs` with the work of the file they were measured on (router/kernel_costs.py), so that another model's
    costs can be scaled from them; as they are where the engine runs no GGUF (a remote model, a checkpoint)."""
    path = getattr(served, "model_path", None)
    if not isinstance(path, Path) or not path.is_file():
        return costs
    try:
        mix = read_tensor_mix(path)
    except ModelFileError:
        return costs
    table = machine_table()
    work = table.work(mix)
    costs = replace(
        costs,
        decode_work=work.decode,
        row_work=work.row,
        vocab=work.vocab,
        context_work=work.context,
        kernels=table.name,
    )
    if not isinstance(costs, DiffusionCosts):
        return costs
    return replace(costs, batch_work=work.batch, shift_rows=int(getattr(served, "shift", 0)))


def interleaved(first: Sequence[list[Step]], second: Sequence[list[Step]]) -> list[Step]:
    """Both engines' rounds taken in turn, so that whatever else the machine does meets each alike; a round's
    own steps stay together (its engine warm)."""
    tagged = [(i / len(first), 0, group) for i, group in enumerate(first)]
    tagged += [(i / len(second), 1, group) for i, group in enumerate(second)]
    return [step for _, _, group in sorted(tagged, key=lambda entry: (entry[0], entry[1])) for step in group]


def calibrate_diffusion(
    engine: DiffusionEngine, sizes: CalibrationSizes, progress: Progress, settings: DiffusionSettings
) -> DiffusionCosts:
    """The diffusion engine's costs alone (a draft waits for the measurement in progress)."""
    measurement = DiffusionMeasurement(engine, sizes, settings)
    with engine.lock:
        measurement.warm_up()
        steps = [step for group in measurement.rounds() for step in group]
        for i, (label, step) in enumerate(steps):
            progress(i / len(steps), label)
            step()
    return measurement.costs()


def calibrate(
    device: DeviceClass,
    ar: AREngine | None,
    diffusion: DiffusionEngine | None,
    sizes: CalibrationSizes = CalibrationSizes(),
    progress: Progress = lambda _f, _s: None,
    settings: DiffusionSettings = DiffusionSettings(),
    cancel: CancelToken | None = None,
) -> CostProfile:
    """Measure what is installed, the two engines interleaved; an engine without a model keeps the device
    class's default costs. A cancelled calibration stops at its next measurement with CalibrationCancelled."""
    defaults = default_profile(device)

    def checked(fraction: float, label: str) -> None:
        if cancel is not None and cancel.cancelled:
            raise CalibrationCancelled()
        progress(fraction, label)

    cores = available_cores()
    before = others_over(WATCH_S, stop=lambda: cancel is not None and cancel.cancelled)
    watching = watch()
    ar_run = _ArMeasurement(ar, sizes) if ar else None
    diffusion_run = DiffusionMeasurement(diffusion, sizes, settings) if diffusion else None
    steps = interleaved(ar_run.rounds() if ar_run else [], diffusion_run.rounds() if diffusion_run else [])
    if diffusion_run:
        steps = [("diffusion: warming up", diffusion_run.warm_up), *steps]
    with diffusion.lock if diffusion else contextlib.nullcontext():  # a draft waits for the measurement
        for i, (label, step) in enumerate(steps):
            checked(i / len(steps), label)
            step()
    during = watching.others()
    ar_costs = _with_work(ar_run.costs(), ar) if ar_run else defaults.ar
    diffusion_costs = _with_work(diffusion_run.costs(), diffusion.backend) if diffusion_run and diffusion else None
    profile = CostProfile(
        device=device,
        machine=f"{platform.node()} {platform.machine()} {platform.processor() or ''}".strip(),
        created=datetime.now(UTC).isoformat(timespec="seconds"),
        calibrated=True,
        measured_under_load=under_load(before, cores) or under_load(during, cores),
        load=MeasuredLoad(cores, round(before or 0.0, 2), round(during or 0.0, 2)),
        ar=ar_costs,
        diffusion=diffusion_costs or defaults.diffusion,
    )
    progress(1.0, "done")
    return profile
