"""Measure the installed engines on this machine and turn the figures into a cost profile."""

from __future__ import annotations

import math
import platform
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime

import numpy as np

from engines.ar_engine import AREngine
from engines.cancel import CancelToken
from engines.diffusion.engine import DiffusionEngine
from engines.diffusion.settings import DiffusionSettings
from engines.events import DiffusionStats, Done, Event, GenerationStats
from router.cost import estimate_diffusion
from router.profile import ArCosts, CostProfile, DeviceClass, DiffusionCosts, default_profile
from router.request import DiffusionPlan

Progress = Callable[[float, str], None]


class CalibrationCancelled(Exception):
    """The calibration was cancelled (a draft started); nothing was saved."""


PROMPT_TEXT = (
    "Thank you for the detailed notes from yesterday's planning meeting. I went through the list of open "
    "questions this morning and I think we can close most of them before the end of the week. "
)
INSTRUCTION = "Write a short email to a colleague about moving our weekly meeting to Thursday."
# Fast-dLLM's confidence threshold, measured where the user set none.
THRESHOLD = 0.9
# Rows of the passes measured for block-causal decoding (its passes decode one block each).
BLOCK_ROWS = (4, 8, 16, 32, 64)


@dataclass(frozen=True)
class CalibrationSizes:
    prompt_tokens: int = 256
    decode_tokens: int = 64
    canvas_sizes: tuple[int, ...] = (64, 128, 256)
    threshold_tokens: int = 64
    repeats: int = 2


QUICK = CalibrationSizes(prompt_tokens=64, decode_tokens=16, canvas_sizes=(16, 32), threshold_tokens=32, repeats=1)


def _done(events: Iterable[Event]) -> Done:
    last = None
    for last in events:  # noqa: B007
        pass
    assert isinstance(last, Done)
    return last


def calibrate_ar(engine: AREngine, sizes: CalibrationSizes, progress: Progress) -> ArCosts:
    text = (PROMPT_TEXT * (sizes.prompt_tokens // 30 + 2))[: sizes.prompt_tokens * 5]
    prompt = engine.leading_text(text, sizes.prompt_tokens)
    rates: list[float] = []
    per_token: list[float] = []
    for attempt in range(sizes.repeats):
        engine.forget_cache()
        progress(attempt / sizes.repeats * 0.5, "AR: prompt evaluation")
        cold = _done(engine.complete(prompt, max_tokens=1)).stats
        assert isinstance(cold, GenerationStats) and cold.time_to_first_token_s
        rates.append(cold.prompt_tokens / cold.time_to_first_token_s)
        progress((attempt + 0.5) / sizes.repeats * 0.5, "AR: token generation")
        warm = _done(engine.complete(prompt + " We", max_tokens=sizes.decode_tokens)).stats
        assert isinstance(warm, GenerationStats) and warm.time_to_first_token_s is not None
        if warm.generated_tokens > 1:
            per_token.append((warm.total_s - warm.time_to_first_token_s) / (warm.generated_tokens - 1))
    return ArCosts(
        model=engine.model_name,
        prompt_tokens_per_s=float(np.median(rates)),
        seconds_per_token=float(np.median(per_token)) if per_token else ArCosts().seconds_per_token,
    )


def calibrate_diffusion(
    engine: DiffusionEngine, sizes: CalibrationSizes, progress: Progress, settings: DiffusionSettings
) -> DiffusionCosts:
    with engine.lock:  # a draft waits for the measurement in progress
        return _measure_diffusion(engine, sizes, progress, settings)


def _measure_diffusion(
    engine: DiffusionEngine, sizes: CalibrationSizes, progress: Progress, settings: DiffusionSettings
) -> DiffusionCosts:
    backend = engine.backend
    prompt = engine.draft_prompt(INSTRUCTION, max(sizes.canvas_sizes)).prompt
    points: list[tuple[int, float]] = []
    if backend.cache_mode == "block":
        # A block-causal pass decodes one block, and predicts each of its rows: a few rows are what count.
        passes = [(np.array([*prompt, *[backend.mask_token_id] * rows])[:rows], 1) for rows in BLOCK_ROWS]
    else:
        passes = [(np.array([*prompt, *[backend.mask_token_id] * n]), len(prompt)) for n in sizes.canvas_sizes]
    # A loaded model's first passes run about twice as slow as a draft's (measured on the embedded drafter:
    # 41 ms + 5.1 ms a position cold, 19 ms + 3.3 warm): each size runs once untimed first.
    for sequence, first in passes:
        backend.reset(cache=False)
        backend.logits(sequence, first, len(sequence), 0)
    total = len(passes) * sizes.repeats
    for i, (sequence, first) in enumerate(passes):
        for r in range(sizes.repeats):
            progress(0.5 + 0.4 * (i * sizes.repeats + r) / total, f"diffusion: a pass over {len(sequence)} positions")
            backend.reset(cache=False)  # a full pass, whatever the cache
            start = time.perf_counter()
            backend.logits(sequence, first, len(sequence), 0)
            points.append((len(sequence), time.perf_counter() - start))
    base, per_position = _fit_line(points)
    # A draft as the user's settings run it, with their threshold or Fast-dLLM's 0.9: passes per token
    # of the text it wrote (it stops at end-of-text, as drafts do).
    measured = replace(settings, threshold=settings.threshold or THRESHOLD)
    progress(0.9, f"diffusion: passes under threshold {measured.threshold}")
    stats = _done(engine.draft(INSTRUCTION, sizes.threshold_tokens, measured)).stats
    assert isinstance(stats, DiffusionStats)
    passes_per_token = min(1.0, stats.passes / max(1, stats.generated_tokens))
    line = DiffusionCosts(pass_base_s=base, pass_s_per_position=per_position, cache=backend.cache_mode)
    scaled = line.slower(draft_scale(stats, measured, line))
    return replace(scaled, model=engine.model_name, threshold_passes_per_token=passes_per_token)


def draft_scale(stats: DiffusionStats, settings: DiffusionSettings, line: DiffusionCosts) -> float:
    """What the draft took over what the passes' line estimates for it: a pass inside a draft also pays the
    sampler and the cache's bookkeeping, which routes must count (on the embedded drafter the bare passes
    alone put a 256-token draft at about half its time)."""
    decoded = stats.canvas_tokens
    if stats.finish_reason == "eos" and settings.schedule == "blocks":
        # It stopped after the block holding end-of-text: the blocks after it were never decoded.
        block = settings.block_length
        decoded = min(decoded, math.ceil((stats.generated_tokens + 1) / block) * block)
    plan = DiffusionPlan(stats.passes, settings.block_length, None, settings.schedule)
    expected = estimate_diffusion(decoded, stats.prompt_tokens, 0, plan, line).seconds
    took = stats.working_s
    return took / expected if expected > 0 and took > 0 else 1.0


def _fit_line(points: Sequence[tuple[int, float]]) -> tuple[float, float]:
    """Least-squares seconds = base + slope x positions, both kept non-negative."""
    x = np.array([p for p, _ in points], dtype=np.float64)
    y = np.array([s for _, s in points], dtype=np.float64)
    if len(set(x)) < 2:
        return 0.0, float(y.mean() / x.mean())
    slope, base = np.polyfit(x, y, 1)
    if base < 0 or slope <= 0:
        # Noise (a busy machine) can tilt a line through a few points; cost per position is the safer read.
        return 0.0, float((y / x).mean())
    return float(base), float(slope)


def calibrate(
    device: DeviceClass,
    ar: AREngine | None,
    diffusion: DiffusionEngine | None,
    sizes: CalibrationSizes = CalibrationSizes(),
    progress: Progress = lambda _f, _s: None,
    settings: DiffusionSettings = DiffusionSettings(),
    cancel: CancelToken | None = None,
) -> CostProfile:
    """Measure what is installed; an engine without a model keeps the device class's default costs.
    A cancelled calibration stops at its next measurement with CalibrationCancelled."""
    defaults = default_profile(device)

    def checked(fraction: float, label: str) -> None:
        if cancel is not None and cancel.cancelled:
            raise CalibrationCancelled()
        progress(fraction, label)

    profile = CostProfile(
        device=device,
        machine=f"{platform.node()} {platform.machine()} {platform.processor() or ''}".strip(),
        created=datetime.now(UTC).isoformat(timespec="seconds"),
        calibrated=True,
        ar=calibrate_ar(ar, sizes, checked) if ar else defaults.ar,
        diffusion=calibrate_diffusion(diffusion, sizes, checked, settings) if diffusion else defaults.diffusion,
    )
    progress(1.0, "done")
    return profile
