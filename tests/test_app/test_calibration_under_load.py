"""A calibration taken under load is marked, shown as such, and measured again in the background when the
editor or the server next starts on an idle machine: the real embedded AR model and a tiny real diffusion
GGUF, real competing processes."""

from __future__ import annotations

import threading
from dataclasses import replace
from pathlib import Path

import pytest
from busy_cpu import busy_processes
from starlette.testclient import TestClient

from app.cli import main
from app.server.app import build_app
from app.service import SharpenService
from app.storage.atomic import write_atomic
from app.storage.config import load_config, set_value
from app.storage.paths import sharpen_paths
from engines.threads import available_cores
from router.cost_measurement import QUICK
from router.profile import CostProfile, MeasuredLoad, load_profile, save_profile


def installed(draft_model: Path, *, auto_calibrate: bool = True) -> SharpenService:
    paths = sharpen_paths()
    set_value(paths.config_file, "models.draft", str(draft_model))
    set_value(paths.config_file, "router.auto_calibrate", "true" if auto_calibrate else "false")
    return SharpenService(load_config(paths.config_file), paths)


def measured_under_load(service: SharpenService) -> CostProfile:
    """A real quick calibration, saved marked as taken beside busy processes."""
    profile = service.calibrations.calibrate(QUICK, lambda _fraction, _label: None)
    loaded = replace(profile, measured_under_load=True, load=MeasuredLoad(available_cores(), 2.0, 1.0))
    save_profile(loaded, service.routing.profile_path, write_atomic)
    return loaded


def test_a_profile_measured_under_load_is_measured_again_on_an_idle_machine(tiny_cacheable_path: Path) -> None:
    service = installed(tiny_cacheable_path)
    before = measured_under_load(service)
    said = service.remeasure_after_load()
    assert said is not None and "measured again on the idle machine" in said
    after, warning = load_profile(service.routing.profile_path, "cpu")
    assert warning is None and after.calibrated and not after.measured_under_load
    assert after.load.others_before < before.load.others_before
    assert after.ar.measured and after.diffusion.measured and after.diffusion.model == tiny_cacheable_path.name


def test_nothing_is_measured_again_while_the_machine_is_busy(tiny_cacheable_path: Path) -> None:
    service = installed(tiny_cacheable_path)
    before = measured_under_load(service)
    with busy_processes(available_cores()):
        assert service.remeasure_after_load() is None
    assert load_profile(service.routing.profile_path, "cpu")[0] == before, "kept: the next start tries again"


def test_an_idle_profile_or_automatic_calibration_turned_off_measures_nothing(tiny_cacheable_path: Path) -> None:
    service = installed(tiny_cacheable_path)
    idle = service.calibrations.calibrate(QUICK, lambda _fraction, _label: None)
    assert not idle.measured_under_load
    assert service.remeasure_after_load() is None
    off = installed(tiny_cacheable_path, auto_calibrate=False)
    loaded = measured_under_load(off)
    assert off.remeasure_after_load() is None
    assert load_profile(off.routing.profile_path, "cpu")[0] == loaded


def test_calibrate_show_says_the_profile_was_measured_under_load(
    tiny_cacheable_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    measured_under_load(installed(tiny_cacheable_path))
    assert main(["calibrate", "--show"]) == 0
    out = capsys.readouterr().out
    assert "measured_under_load = true" in out and "[load]" in out
    assert f"# measured under load (other processes kept 2.0 of {available_cores()} cores busy before it" in out
    assert "measures them again when it next starts on an idle machine" in out


def test_the_server_measures_again_at_start_up_in_a_thread(
    tiny_cacheable_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    service = installed(tiny_cacheable_path)
    ran = threading.Event()
    threads: list[threading.Thread] = []

    def remeasure() -> str | None:
        threads.append(threading.current_thread())
        ran.set()
        return None

    monkeypatch.setattr(service, "remeasure_after_load", remeasure)
    with TestClient(build_app(service)):
        assert ran.wait(10)
    assert threads[0] is not threading.main_thread()
