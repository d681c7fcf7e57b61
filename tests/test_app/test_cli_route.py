"""`sharpen route`, `sharpen calibrate` and drafts going through the router."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.cli import main
from router.kernel_costs import machine_table


def run_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict:
    assert main(list(args)) == 0
    return json.loads(capsys.readouterr().out)


def no_draft_model(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "set", "models.draft", ""]) == 0
    capsys.readouterr()


def test_route_without_a_diffusion_model(capsys: pytest.CaptureFixture[str]) -> None:
    no_draft_model(capsys)
    route = run_json(capsys, "route", "--kind", "draft", "--tokens", "200", "--json")
    assert route["engine"] == "ar" and "only the AR engine" in route["reason"]
    assert route["calibrated"] is False and set(route["estimates"]) == {"ar"}


def test_route_explain_shows_both_estimates(tiny_cacheable_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "set", "models.draft", str(tiny_cacheable_path)]) == 0
    capsys.readouterr()
    # Before calibration each figure is estimated from its model's size, and says so.
    assert main(["route", "--kind", "draft", "--tokens", "200", "--explain"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"diffusion ({tiny_cacheable_path}): diffusion estimated faster")
    assert "(estimated from the size of sharpen-write)" in out
    assert f"(estimated from the size of {tiny_cacheable_path.name})" in out and "settings:" in out
    # Under design, a budget the diffusion estimate breaks sends the draft to AR when AR is faster.
    assert (
        main(["route", "--kind", "draft", "--tokens", "4000", "--explain", "--budget", "0.001", "--policy", "design"])
        == 0
    )
    out = capsys.readouterr().out
    assert out.startswith("AR (sharpen-write): diffusion estimated")
    assert "breaks the 0.0 s budget" in out and "diffusion" in out and " s  " in out
    route = run_json(capsys, "route", "--kind", "complete", "--tokens", "12", "--json")
    assert route["engine"] == "ar" and set(route["estimates"]) == {"ar", "diffusion"}
    forced = run_json(capsys, "route", "--kind", "complete", "--tokens", "12", "--engine", "diffusion", "--json")
    assert forced["engine"] == "diffusion" and forced["settings"]["block_length"] == 32


def test_calibrate_quick_then_show(
    tiny_cacheable_path: Path, tiny_dream_path: Path, sharpen_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["config", "set", "models.draft", str(tiny_cacheable_path)]) == 0
    assert main(["calibrate", "--quick"]) == 0
    out = capsys.readouterr().out
    assert "calibrated = true" in out and "[diffusion]" in out and "is estimated faster" in out
    assert (sharpen_home / "data" / "calibration.toml").is_file()
    assert main(["calibrate", "--show"]) == 0
    assert "calibrated = true" in capsys.readouterr().out
    route = run_json(capsys, "route", "--kind", "draft", "--tokens", "100", "--json")
    assert route["calibrated"] is True
    # Another draft model: its costs carried from the ones measured, by the two files' work at the kernel costs
    # of this machine's CPU class, which the explanation names.
    assert main(["config", "set", "models.draft", str(tiny_dream_path)]) == 0
    capsys.readouterr()
    assert main(["route", "--kind", "draft", "--tokens", "100", "--explain"]) == 0
    out = capsys.readouterr().out
    assert f"estimated for {tiny_dream_path.name} from the costs measured for {tiny_cacheable_path.name}" in out
    assert f"by their files' work at the kernel costs of {machine_table().label})" in out


def test_corrupt_profile_warns_and_routes_on_defaults(sharpen_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    profile = sharpen_home / "data" / "calibration.toml"
    profile.parent.mkdir(parents=True)
    profile.write_text("not [valid toml")
    no_draft_model(capsys)
    assert main(["route", "--kind", "draft", "--tokens", "100"]) == 0
    captured = capsys.readouterr()
    assert "warning" in captured.err and "using defaults" in captured.err
    assert captured.out.startswith("AR")


def test_draft_without_a_diffusion_model_goes_to_ar(capsys: pytest.CaptureFixture[str]) -> None:
    no_draft_model(capsys)
    result = run_json(capsys, "draft", "Write a one-line note to Sam.", "--tokens", "40", "--json")
    assert result["text"].strip() and result["model"] == "sharpen-write" and result["engine"] == "ar"
    assert main(["draft", "Write a note.", "--tokens", "40", "--engine", "diffusion"]) == 1
    assert "diffusion engine was asked for" in capsys.readouterr().err


def test_draft_reports_the_route_reason(tiny_cacheable_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "set", "models.draft", str(tiny_cacheable_path)]) == 0
    assert main(["config", "set", "router.latency_budget_s", "0"]) == 0
    capsys.readouterr()
    assert main(["draft", "Write a note.", "--tokens", "40", "--quality", "fast"]) == 0
    err = capsys.readouterr().err
    assert "sharpen: diffusion: --quality is read only by the diffusion engine" in err
    assert "40 tokens in 5 passes" in err  # K = N/8 for "fast"


def test_a_draft_model_measured_far_behind_ar_loses_long_drafts_to_it(
    tiny_cacheable_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = Path(main_config_path(capsys))
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(
        '[models]\ndraft = "weak-draft"\n\n[catalogue.weak-draft]\nrole = "draft"\nengine = "llama-diffusion"\n'
        f'source = "path:{tiny_cacheable_path}"\ndrafts_position = 0.55\n'
    )
    route = run_json(capsys, "route", "--kind", "draft", "--tokens", "400", "--json")
    assert route["engine"] == "ar", route
    assert (
        "weak-draft's drafts sit 0.55 behind AR's" in route["reason"]  # sharpen-write's own drafts are its 0
        and "router.quality_margin (0.30)" in route["reason"]
    )
    # Within the margin, or under another policy, or for an infill, the estimates decide as before.
    assert main(["config", "set", "router.quality_margin", "0.6"]) == 0
    capsys.readouterr()
    within = run_json(capsys, "route", "--kind", "draft", "--tokens", "400", "--json")
    assert within["engine"] == "diffusion" and "pass the quality gate" in within["reason"]
    assert main(["config", "set", "router.quality_margin", "0.3"]) == 0
    capsys.readouterr()
    quality = run_json(capsys, "route", "--kind", "draft", "--tokens", "400", "--policy", "quality", "--json")
    assert quality["engine"] == "diffusion"
    assert run_json(capsys, "route", "--kind", "infill", "--tokens", "400", "--json")["engine"] == "diffusion"


def main_config_path(capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["config", "path"]) == 0
    return capsys.readouterr().out.strip()
