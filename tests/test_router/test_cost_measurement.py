"""Calibration on the real engines at a reduced size, and the profile file."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from busy_cpu import busy_processes

from app.storage.atomic import write_atomic
from engines.cancel import CancelToken
from engines.diffusion.engine import DiffusionEngine
from engines.diffusion.llama_backend import LlamaDiffusionBackend
from engines.diffusion.load_settings import DiffusionLoadSettings
from engines.diffusion.settings import DiffusionSettings
from engines.events import DiffusionStats, FinishReason
from engines.llama_ar import LlamaAREngine
from engines.threads import available_cores
from router.cost import estimate_ar, estimate_diffusion, pass_seconds
from router.cost_measurement import (
    BLOCK_PASS_TIMINGS,
    BLOCK_ROWS,
    CONTEXT_TOKENS,
    QUICK,
    CalibrationCancelled,
    DiffusionMeasurement,
    calibrate,
    context_line,
    draft_scale,
    sampler_seconds_per_row,
    token_line,
)
from router.machine_load import BUSY_SHARE
from router.profile import ArCosts, CostProfile, DiffusionCosts, default_profile, load_profile, save_profile
from router.request import DiffusionPlan

SLOW_SPELL_S = 0.05


@pytest.fixture(scope="module")
def measured(ar_engine: LlamaAREngine, tiny_cacheable_path: Path) -> CostProfile:
    diffusion = DiffusionEngine(LlamaDiffusionBackend(tiny_cacheable_path), "tiny-cacheable")
    seen: list[float] = []
    profile = calibrate("cpu", ar_engine, diffusion, QUICK, lambda fraction, _label: seen.append(fraction))
    assert seen == sorted(seen) and seen[-1] == 1.0
    return profile


def test_calibration_measures_both_engines(measured: CostProfile) -> None:
    assert measured.calibrated and measured.device == "cpu"
    assert measured.ar.model == "smollm2-135m-instruct"
    # This model generates tens of tokens per second and evaluates prompts faster than it generates.
    assert 0.001 < measured.ar.seconds_per_token < 1.0
    # Timed after two contexts: a token's growth with its context is measured (noise may flatten it to 0).
    assert 0 <= measured.ar.seconds_per_context_token < measured.ar.seconds_per_token
    assert measured.diffusion.model == "tiny-cacheable" and measured.diffusion.cache == "dual"
    assert measured.diffusion.pass_base_s >= 0 and measured.diffusion.pass_s_per_position > 0
    assert 0 < measured.diffusion.threshold_passes_per_token <= 1


def test_an_idle_calibration_is_not_marked_as_under_load(measured: CostProfile) -> None:
    assert not measured.measured_under_load, measured.load
    assert measured.load.cores >= 1 and measured.load.others_during < measured.load.cores


def test_a_calibration_beside_busy_processes_is_marked_as_under_load(
    ar_engine: LlamaAREngine, tiny_cacheable_path: Path
) -> None:
    diffusion = DiffusionEngine(LlamaDiffusionBackend(tiny_cacheable_path), "tiny-cacheable")
    with busy_processes(available_cores()):  # every core kept busy by other work
        profile = calibrate("cpu", ar_engine, diffusion, QUICK)
    assert profile.measured_under_load
    assert profile.load.others_before >= BUSY_SHARE * profile.load.cores


def test_the_two_engines_are_measured_interleaved(ar_engine: LlamaAREngine, tiny_cacheable_path: Path) -> None:
    diffusion = DiffusionEngine(LlamaDiffusionBackend(tiny_cacheable_path), "tiny-cacheable")
    labels: list[str] = []
    calibrate("cpu", ar_engine, diffusion, replace(QUICK, repeats=2), lambda _fraction, label: labels.append(label))
    engines = [label.split(":")[0] for label in labels if label.startswith(("AR:", "diffusion: a pass"))]
    # AR's measurements sit between the passes', not all before or after them.
    first_ar, last_ar = engines.index("AR"), len(engines) - 1 - engines[::-1].index("AR")
    assert "diffusion" in engines[:first_ar] or "diffusion" in engines[first_ar:last_ar], engines


def test_without_a_diffusion_model_its_costs_stay_default(ar_engine: LlamaAREngine) -> None:
    profile = calibrate("cpu", ar_engine, None, QUICK)
    assert profile.diffusion == default_profile("cpu").diffusion


def test_profile_round_trip(tmp_path: Path, measured: CostProfile) -> None:
    path = tmp_path / "calibration.toml"
    save_profile(measured, path, write_atomic)
    loaded, warning = load_profile(path, "cpu")
    assert warning is None and loaded == measured


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("version = 1\n[ar\n", "cannot read"),
        ("version = 7\n", "version 7"),
        ("version = 1\n[ar]\nseconds_per_token = 'fast'\n", "wrong type"),
        ("version = 1\n[ar]\nseconds_per_token = -1.0\n", "negative"),
        ("version = 1\n[diffusion]\nwarp = 1.0\n", "unknown keys"),
        ("version = 1\n[diffusion]\ncache = 'triple'\n", "not one of none, prefix, dual"),
        ("version = 1\nmeasured_under_load = 'yes'\n", "measured_under_load"),
        ("version = 1\n[load]\ncores = 2.5\n", "wrong type"),
    ],
)
def test_a_corrupt_profile_falls_back_to_defaults_with_a_warning(tmp_path: Path, text: str, why: str) -> None:
    path = tmp_path / "calibration.toml"
    path.write_text(text)
    profile, warning = load_profile(path, "gpu")
    assert profile == default_profile("gpu")
    assert warning is not None and why in warning and str(path) in warning


@pytest.mark.parametrize(("written", "read"), [(True, "prefix"), (False, "none")])
def test_a_profile_from_before_the_dual_cache_keeps_its_measurements(tmp_path: Path, written: bool, read: str) -> None:
    path = tmp_path / "calibration.toml"
    flag = "true" if written else "false"
    path.write_text(f"version = 1\n[diffusion]\npass_s_per_position = 0.002\nprefix_cache = {flag}\n")
    profile, warning = load_profile(path, "cpu")
    assert warning is None
    assert profile.diffusion.cache == read and profile.diffusion.pass_s_per_position == 0.002


def test_a_profile_from_before_ar_s_context_term_estimates_a_token_as_it_did(tmp_path: Path) -> None:
    path = tmp_path / "calibration.toml"
    path.write_text("version = 1\n[ar]\nseconds_per_token = 0.007\nprompt_tokens_per_s = 1000.0\n")
    profile, warning = load_profile(path, "cpu")
    assert warning is None
    assert profile.ar.seconds_per_context_token == 0.0 and profile.ar.context_work == 0.0
    assert estimate_ar(100, 400, profile.ar).seconds == pytest.approx(0.4 + 100 * 0.007)


def test_an_ar_token_costs_more_the_more_context_it_attends_to() -> None:
    costs = ArCosts(prompt_tokens_per_s=1000.0, seconds_per_token=0.005, seconds_per_context_token=4e-6)
    short, long = estimate_ar(256, 16, costs), estimate_ar(256, 512, costs)
    assert long.seconds - 0.512 > short.seconds - 0.016, "the same tokens after a longer prompt take longer"
    # Token i attends to the prompt and the i before it: 256 tokens x (5 ms + 4 us x (16 + 127.5)).
    assert short.seconds == pytest.approx(0.016 + 256 * (0.005 + 4e-6 * 143.5))
    assert estimate_ar(1, 0, costs).seconds == pytest.approx(0.005)


def test_ar_s_line_runs_through_the_short_and_the_long_context() -> None:
    per_token, per_context = token_line([(288.0, 0.0065), (48.0, 0.0053)])
    assert per_context == pytest.approx(0.0012 / 240)
    assert per_token + per_context * 48 == pytest.approx(0.0053)
    # Noise that makes the longer context faster: one time for every context, the median.
    assert token_line([(48.0, 0.006), (288.0, 0.005)]) == pytest.approx((0.0055, 0.0))
    assert token_line([]) == (ArCosts().seconds_per_token, 0.0)


def test_a_block_pass_s_line_is_taken_apart_from_the_context_it_attends_to() -> None:
    # Passes of 4 to 64 rows after each calibrated context: 8 ms + 1 ms a row with no context, each position of
    # context adding 10 us to the pass and 1 us to each row.
    def took(context: int, rows: int) -> float:
        return 0.008 + 0.001 * rows + context * (10e-6 + 1e-6 * rows)

    points = [(context, rows, took(context, rows)) for context in CONTEXT_TOKENS for rows in BLOCK_ROWS]
    line = context_line(points)
    assert line.pass_base_s == pytest.approx(0.008) and line.pass_s_per_position == pytest.approx(0.001)
    assert line.pass_s_per_context == pytest.approx(10e-6) and line.pass_s_per_row_context == pytest.approx(1e-6)
    assert pass_seconds(16, line, 256) == pytest.approx(took(256, 16))
    # Noise that made the longer contexts cheaper: no growth, one line through every context's passes.
    short = min(CONTEXT_TOKENS)
    flat = context_line([(c, r, took(short, r) * (0.9 if c > short else 1.0)) for c, r, _ in points])
    assert flat.pass_s_per_context == 0.0 and flat.pass_s_per_row_context == 0.0
    assert 0.9 * took(short, 16) < pass_seconds(16, flat, short) < took(short, 16)
    # A plane below zero at no rows (noise on a fast machine): a cost per row and no fixed part.
    per_row = context_line([(c, r, 0.001 * r - 0.002) for c, r, _ in points])
    assert per_row.pass_base_s == 0.0 and per_row.pass_s_per_position > 0.0
    # Full passes (the other caches' calibration) have no cached context.
    full = context_line([(0, p, 0.01 + 0.002 * p) for p in (64, 128, 256)])
    assert (full.pass_base_s, full.pass_s_per_position) == pytest.approx((0.01, 0.002))


def test_the_passes_noise_moves_little_cost_between_a_pass_and_its_rows() -> None:
    """A pass's fixed part, its cost per row and its growth with context are carried to another model by
    different works (router/profile.py scaled_diffusion: for a 1.7B model about 6x, 8x and 3.3x), so noise that
    moves cost from one to another moves that model's estimates. Each pass slowed by up to about 15% (noise
    only slows), 300 times over: the carried 4- and 64-row passes stay within 12% (lines after 128 and 384
    positions, taken apart, strayed 16%)."""

    def took(context: int, rows: int) -> float:
        return 0.012 + 0.0016 * rows + context * (2e-6 + 1.2e-6 * rows)

    def carried(line: DiffusionCosts, rows: int) -> float:
        context = 192 * 3.3 * (line.pass_s_per_context + line.pass_s_per_row_context * rows)
        return 6 * line.pass_base_s + 8 * line.pass_s_per_position * rows + context

    truth = DiffusionCosts(pass_base_s=0.012, pass_s_per_position=0.0016, pass_s_per_context=2e-6)
    truth = replace(truth, pass_s_per_row_context=1.2e-6)
    rng = np.random.default_rng(0)
    for _ in range(300):
        noisy = [(c, r, took(c, r) * (1 + abs(rng.normal(0, 0.05)))) for c in CONTEXT_TOKENS for r in BLOCK_ROWS]
        line = context_line(noisy)
        for rows in (4, 64):
            assert carried(line, rows) == pytest.approx(carried(truth, rows), rel=0.12)


def test_a_block_causal_draft_costs_more_a_token_the_longer_it_runs() -> None:
    costs = DiffusionCosts(
        pass_base_s=0.008,
        pass_s_per_position=0.001,
        cache="block",
        pass_s_per_context=10e-6,
        pass_s_per_row_context=1e-6,
    )
    flat = replace(costs, pass_s_per_context=0.0, pass_s_per_row_context=0.0)

    def per_token(n: int, profile: DiffusionCosts) -> float:
        return estimate_diffusion(n, 32, 0, DiffusionPlan(n // 4, 8, None, "blocks"), profile).seconds / n

    assert per_token(400, costs) > per_token(128, costs) * 1.05, "later blocks attend to more settled ones"
    assert per_token(400, flat) <= per_token(128, flat), "without the context terms a token never costs more"


def test_a_profile_from_before_the_context_terms_estimates_drafts_as_it_did(tmp_path: Path) -> None:
    path = tmp_path / "calibration.toml"
    path.write_text("version = 1\n[diffusion]\npass_base_s = 0.01\npass_s_per_position = 0.001\ncache = 'block'\n")
    profile, warning = load_profile(path, "cpu")
    assert warning is None and profile.diffusion.pass_s_per_context == profile.diffusion.pass_s_per_row_context == 0
    assert pass_seconds(8, profile.diffusion, 400) == pytest.approx(0.018)


def test_no_profile_means_defaults_silently(tmp_path: Path) -> None:
    assert load_profile(tmp_path / "none.toml", "cpu") == (default_profile("cpu"), None)


def test_a_cancelled_calibration_stops_and_saves_nothing(ar_engine: LlamaAREngine) -> None:
    cancel = CancelToken()
    steps: list[str] = []

    def progress(_fraction: float, label: str) -> None:
        steps.append(label)
        cancel.cancel()  # as a draft starting does

    with pytest.raises(CalibrationCancelled):
        calibrate("cpu", ar_engine, None, QUICK, progress, cancel=cancel)
    assert len(steps) == 1, "it stopped at the next measurement"


def _stats(total_s: float, generated: int, finish: FinishReason, backend_s: float | None = None) -> DiffusionStats:
    return DiffusionStats(
        prompt_tokens=20,
        canvas_tokens=32,
        generated_tokens=generated,
        passes=8,
        total_s=total_s,
        backend_s=total_s if backend_s is None else backend_s,
        finish_reason=finish,
        cache="block",
    )


def test_the_line_through_the_passes_is_scaled_to_the_draft_it_estimates() -> None:
    settings = DiffusionSettings(block_length=8, schedule="blocks")
    line = DiffusionCosts(pass_base_s=0.01, pass_s_per_position=0.002, cache="block")
    plan = DiffusionPlan(8, 8, None, "blocks")
    bare = estimate_diffusion(32, 20, 0, plan, line).seconds
    scale = draft_scale(_stats(2 * bare, 32, "length"), settings, line)
    assert scale == pytest.approx(2.0)
    scaled = DiffusionCosts(pass_base_s=0.01 * scale, pass_s_per_position=0.002 * scale, cache="block")
    assert estimate_diffusion(32, 20, 0, plan, scaled).seconds == pytest.approx(2 * bare)
    # A draft that stopped at end-of-text in its second block decoded two blocks of its four, not the canvas.
    two_blocks = estimate_diffusion(16, 20, 0, plan, line).seconds
    assert two_blocks < bare
    assert draft_scale(_stats(two_blocks, 10, "eos"), settings, line) == pytest.approx(1.0)


def test_the_sampler_s_own_time_is_apart_from_the_passes() -> None:
    settings = DiffusionSettings(block_length=8, schedule="blocks")
    line = DiffusionCosts(pass_base_s=0.01, pass_s_per_position=0.002, cache="block")
    plan = DiffusionPlan(8, 8, None, "blocks")
    bare = estimate_diffusion(32, 20, 0, plan, line).seconds
    # The passes took what the line says; the sampler 0.16 s more, over 8 passes of a block of 8 rows.
    stats = _stats(bare + 0.16, 32, "length", backend_s=bare)
    assert draft_scale(stats, settings, line) == pytest.approx(1.0)
    per_row = sampler_seconds_per_row(stats, settings)
    assert per_row == pytest.approx(0.16 / (8 * 8))
    with_sampler = replace(line, sampler_s_per_row=per_row)
    assert estimate_diffusion(32, 20, 0, plan, with_sampler).seconds == pytest.approx(bare + 0.16)


def test_a_block_pass_is_timed_against_its_settled_context_and_its_fastest_timing_kept(
    tiny_cacheable_path: Path,
) -> None:
    """A shared machine runs in spells up to 25% slower: each block pass is timed BLOCK_PASS_TIMINGS times
    after its context is settled, and a slow timing among them never reaches the line."""
    backend = LlamaDiffusionBackend(tiny_cacheable_path, DiffusionLoadSettings(cache="block"))
    assert backend.cache_mode == "block", backend.cache_note
    measurement = DiffusionMeasurement(DiffusionEngine(backend, "tiny-block"), QUICK, DiffusionSettings())
    calls: list[int] = []
    logits = backend.logits

    def slow_but_the_last(*args: Any) -> np.ndarray:
        calls.append(1)
        # Per pass: the context settled, then the timed passes, all but the last in a slow spell.
        if 0 < (len(calls) - 1) % (BLOCK_PASS_TIMINGS + 1) < BLOCK_PASS_TIMINGS:
            time.sleep(SLOW_SPELL_S)
        return logits(*args)

    backend.logits = slow_but_the_last  # type: ignore[method-assign,assignment]
    _warm_up, *timed, _draft = measurement.rounds()[0]
    for _label, step in timed:
        step()
    assert len(calls) == len(measurement.passes) * (BLOCK_PASS_TIMINGS + 1)
    assert len(measurement.points) == len(measurement.passes)
    assert all(seconds < SLOW_SPELL_S for _, _, seconds in measurement.points)
    assert {(context, rows) for context, rows, _ in measurement.points} == {
        (context, rows) for context in QUICK.context_tokens for rows in BLOCK_ROWS
    }


def test_the_calibration_drafts_once_a_round_and_its_fastest_draft_sets_the_scale(tiny_cacheable_path: Path) -> None:
    """One draft sets the level every diffusion estimate carries: drafts spread over the rounds, so that a slow
    state of the machine, which lasts minutes, does not hold every one of them."""
    backend = LlamaDiffusionBackend(tiny_cacheable_path, DiffusionLoadSettings(cache="block"))
    sizes = replace(QUICK, repeats=3)
    measurement = DiffusionMeasurement(DiffusionEngine(backend, "tiny-block"), sizes, DiffusionSettings())
    rounds = measurement.rounds()
    assert [label for group in rounds for label, _ in group if "threshold" in label] == [
        measurement.draft_step()[0]
    ] * sizes.repeats
    drafts: list[int] = []
    draft, logits = measurement.engine.draft, backend.logits

    def counted(*args: Any, **kwargs: Any) -> Any:
        drafts.append(1)
        return draft(*args, **kwargs)

    def slow_in_all_drafts_but_the_last(*args: Any) -> np.ndarray:
        if len(drafts) < sizes.repeats:
            time.sleep(SLOW_SPELL_S)
        return logits(*args)

    measurement.engine.draft = counted  # type: ignore[method-assign]
    backend.logits = slow_in_all_drafts_but_the_last  # type: ignore[method-assign,assignment]
    for group in rounds:
        _label, step = group[-1]
        step()
    assert len(drafts) == len(measurement.drafts) == sizes.repeats
    assert measurement.stats is not None and measurement.stats.passes > 0
    assert measurement.stats.backend_s < SLOW_SPELL_S * measurement.stats.passes, "a slow draft's time was kept"


def test_a_line_runs_through_each_size_s_fastest_round() -> None:
    """Noise only slows a pass: a round in a slow spell does not lift the line."""
    rounds = [(context, rows, 0.01 + 0.001 * rows) for context in (128, 384) for rows in (4, 64)]
    slow = [(context, rows, 2 * seconds) for context, rows, seconds in rounds]
    assert context_line(rounds + slow) == context_line(rounds)
