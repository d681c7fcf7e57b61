"""A fresh install measures its engines quickly before its first draft, so that no route is decided on
costs guessed from the models' sizes: the real embedded AR model and a tiny real diffusion GGUF."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import pytest

import app.orchestration.machine_calibration as machine_calibration
from app.domain.draft_request import DraftRequest
from app.orchestration.machine_calibration import LEARN_MIN_TOKENS, LEARNING_RATE
from app.service import SharpenService
from app.storage.atomic import write_atomic
from app.storage.config import load_config, set_value
from app.storage.paths import SharpenPaths, sharpen_paths
from router.profile import load_profile, save_profile
from router.request import EngineName


def fresh_install(draft_model: Path, *, auto_calibrate: bool = True) -> SharpenService:
    paths: SharpenPaths = sharpen_paths()
    set_value(paths.config_file, "models.draft", str(draft_model))
    set_value(paths.config_file, "router.auto_calibrate", "true" if auto_calibrate else "false")
    return SharpenService(load_config(paths.config_file), paths)


def drafted(service: SharpenService, engine: EngineName = "diffusion") -> str:
    reply = service.draft(DraftRequest("draft", "Write a note to Sam.", tokens=24, engine=engine))
    assert reply.text() is not None and reply.done is not None
    return reply.route.reason


def test_the_first_draft_measures_both_engines_and_says_so_once(tiny_cacheable_path: Path) -> None:
    service = fresh_install(tiny_cacheable_path)
    assert service.calibrations.needed() == ["ar", "diffusion"]
    assert not service.routing.profile_path.exists()
    first = drafted(service, "ar")
    assert "the AR model and the draft model measured on this machine first" in first
    saved, warning = load_profile(service.routing.profile_path, "cpu")
    assert warning is None and saved.calibrated
    assert saved.ar.measured and saved.ar.model == "sharpen-write" and saved.ar.seconds_per_token > 0
    assert saved.diffusion.measured and saved.diffusion.model == tiny_cacheable_path.name
    assert saved.diffusion.pass_s_per_position > 0
    assert service.calibrations.needed() == []
    assert "measured on this machine" not in drafted(service)
    profile, _ = service.routing.cost_profile()
    assert profile.ar.measured and profile.diffusion.measured


def test_a_new_draft_model_is_measured_alone_and_keeps_the_ar_figures(
    tiny_cacheable_path: Path, tiny_dream_path: Path
) -> None:
    service = fresh_install(tiny_cacheable_path)
    drafted(service)
    ar_before = load_profile(service.routing.profile_path, "cpu")[0].ar
    service.use_model("draft", str(tiny_dream_path), force=True)
    assert service.calibrations.needed() == ["diffusion"]
    assert "the draft model measured on this machine first" in drafted(service)
    saved = load_profile(service.routing.profile_path, "cpu")[0]
    assert saved.ar.model == ar_before.model and saved.ar.prompt_tokens_per_s == ar_before.prompt_tokens_per_s
    assert saved.diffusion.measured and saved.diffusion.model == tiny_dream_path.name


def test_turned_off_nothing_is_measured(tiny_cacheable_path: Path) -> None:
    service = fresh_install(tiny_cacheable_path, auto_calibrate=False)
    assert "measured on this machine" not in drafted(service)
    assert not service.routing.profile_path.exists()
    profile, _ = service.routing.cost_profile()
    assert not profile.ar.measured and not profile.diffusion.measured


def test_a_model_estimated_too_slow_to_measure_quickly_is_left_to_sharpen_calibrate(
    tiny_cacheable_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As for an 8B model on a CPU: a pass over 64 positions estimated longer than the limit.
    monkeypatch.setattr(machine_calibration, "QUICK_PASS_LIMIT_S", 0.0)
    service = fresh_install(tiny_cacheable_path)
    assert service.calibrations.needed() == ["ar"]
    assert "the AR model measured on this machine first" in drafted(service)
    saved = load_profile(service.routing.profile_path, "cpu")[0]
    assert saved.ar.measured and not saved.diffusion.measured


def test_each_finished_draft_moves_the_costs_toward_what_it_took(tiny_cacheable_path: Path) -> None:
    service = fresh_install(tiny_cacheable_path)
    drafted(service, "ar")
    path = service.routing.profile_path
    measured = load_profile(path, "cpu")[0]
    # Costs four times too high, as a calibration on a busy machine might read them.
    slow = replace(measured.ar, seconds_per_token=4 * measured.ar.seconds_per_token)
    save_profile(replace(measured, ar=slow), path, write_atomic)
    reply = service.draft(DraftRequest("draft", "Write a long letter to Sam about the garden.", tokens=64, engine="ar"))
    reply.text()
    assert reply.done is not None and reply.done.stats.generated_tokens >= LEARN_MIN_TOKENS
    learnt = load_profile(path, "cpu")[0].ar
    # A quarter of the way in log space: the estimate was about 4x the time, so the cost falls by about 1.4x.
    assert slow.seconds_per_token / 2 < learnt.seconds_per_token < slow.seconds_per_token / 1.1
    assert learnt.prompt_tokens_per_s > slow.prompt_tokens_per_s


def test_learning_leaves_estimated_costs_and_other_models_alone(tiny_cacheable_path: Path) -> None:
    service = fresh_install(tiny_cacheable_path)
    path = service.routing.profile_path
    service.calibrations.learn("diffusion", 1.0, 2.0)
    assert not path.exists(), "nothing measured yet: the calibration measures first"
    drafted(service, "ar")
    measured = load_profile(path, "cpu")[0]
    saved_for_another = replace(measured, diffusion=replace(measured.diffusion, model="another-model"))
    save_profile(saved_for_another, path, write_atomic)
    service.calibrations.learn("diffusion", 1.0, 2.0)
    assert load_profile(path, "cpu")[0] == saved_for_another
    save_profile(measured, path, write_atomic)
    service.calibrations.learn("diffusion", 1.0, 2.0)
    learnt = load_profile(path, "cpu")[0].diffusion
    step = 2.0**LEARNING_RATE
    assert learnt.pass_base_s == pytest.approx(measured.diffusion.pass_base_s * step)
    assert learnt.pass_s_per_position == pytest.approx(measured.diffusion.pass_s_per_position * step)


def test_a_draft_with_fixed_passes_teaches_nothing(tiny_cacheable_path: Path) -> None:
    service = fresh_install(tiny_cacheable_path)
    drafted(service, "ar")
    path = service.routing.profile_path
    measured = load_profile(path, "cpu")[0]
    request = DraftRequest("draft", "Write a note.", tokens=32, engine="diffusion", overrides={"steps": 32})
    reply = service.draft(request)
    reply.text()
    assert reply.done is not None and reply.done.stats.generated_tokens >= LEARN_MIN_TOKENS
    assert load_profile(path, "cpu")[0] == measured
    service.draft(replace(request, overrides={})).text()
    assert load_profile(path, "cpu")[0].diffusion != measured.diffusion, "the router's own plan teaches"


def test_two_first_drafts_at_once_measure_the_machine_once(tiny_cacheable_path: Path) -> None:
    service = fresh_install(tiny_cacheable_path)
    with ThreadPoolExecutor(2) as pool:
        reasons = list(pool.map(lambda _: drafted(service), range(2)))
    assert sum("measured on this machine first" in reason for reason in reasons) == 1


def test_a_measurement_that_failed_is_not_tried_again_that_session(truncated_path: Path) -> None:
    service = fresh_install(truncated_path)
    assert service.measures_first()
    note = service.calibrations.before_draft(None, enabled=True)
    assert note is not None and note.startswith("could not measure this machine")
    assert not service.measures_first(), "the editor no longer says it is measuring"
    assert service.calibrations.before_draft(None, enabled=True) is None
