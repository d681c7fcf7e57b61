"""`sharpen calibrate --show` plots both engines' estimated seconds against the draft length and marks the
crossover, which `sharpen route` must agree with; `--plot FILE` writes the same plot as an SVG."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from app.cli import main
from app.storage.atomic import write_atomic
from router.profile import ArCosts, CostProfile, DiffusionCosts, save_profile

AR_MODEL = "sharpen-write"  # the writing model: the one drafts run on and calibration measures
SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture
def draft_model(tiny_cacheable_path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["config", "set", "models.draft", str(tiny_cacheable_path)]) == 0
    capsys.readouterr()
    return tiny_cacheable_path.name


def calibrated(home: Path, draft: str, pass_base_s: float, pass_s_per_position: float) -> None:
    """A saved profile for the configured models (AR at 16 ms a token), so the crossover is known to lie
    where the test wants it."""
    profile = CostProfile(
        created="2026-01-01",
        calibrated=True,
        ar=ArCosts(AR_MODEL, 223.0, 0.016),
        diffusion=DiffusionCosts(draft, pass_base_s, pass_s_per_position, cache="dual"),
    )
    save_profile(profile, home / "data" / "calibration.toml", write_atomic)


def show(capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[str, str]:
    assert main(["calibrate", "--show", *extra]) == 0
    captured = capsys.readouterr()
    return captured.out, captured.err


def routed_engine(capsys: pytest.CaptureFixture[str], tokens: int) -> str:
    args = ["route", "--kind", "draft", "--tokens", str(tokens), "--policy", "fastest", "--json"]
    assert main(args) == 0
    return str(json.loads(capsys.readouterr().out)["engine"])


def summary_of(out: str) -> str:
    return next(line for line in out.splitlines() if line.startswith("# drafts of 30 to 4096 tokens"))


def test_show_draws_both_curves_and_a_crossover_the_router_agrees_with(
    draft_model: str, sharpen_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    calibrated(sharpen_home, draft_model, 0.02, 0.0005)
    out, _ = show(capsys)
    # The profile and the one-sentence summary; the plot follows them, uncoloured and 100 columns wide.
    summary = summary_of(out)
    assert "calibrated = true" in out and "# measured on an idle machine" in out
    found = re.fullmatch(
        r"# drafts of 30 to 4096 tokens \(after a 32-token prompt, at quality balanced\): diffusion is estimated "
        r"faster up to (\d+) tokens; AR from (\d+) tokens on; shorter drafts go to AR whatever the estimates",
        summary,
    )
    assert found, summary
    n = int(found.group(2))
    assert n == int(found.group(1)) + 1 == 449
    plot = out.split(summary + "\n", 1)[1].splitlines()
    assert "\033" not in out and len(plot) == 24 and max(len(line) for line in plot) <= 100, out
    assert f"AR: {AR_MODEL}" in out and f"diffusion: {draft_model}" in out
    assert "quality balanced, K = N/4" in out and "AR measured, diffusion measured" in out
    assert "▚" in out and "⢕" in out and "│ AR faster from 449 tokens" in out  # both curves and the marked line
    assert (routed_engine(capsys, n - 1), routed_engine(capsys, n)) == ("diffusion", "ar")
    assert routed_engine(capsys, 1024) == "ar"


def test_the_crossover_follows_the_quality_preset(
    draft_model: str, sharpen_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    calibrated(sharpen_home, draft_model, 0.02, 0.0005)
    assert main(["config", "set", "router.quality", "best"]) == 0  # K = N/2: diffusion loses sooner
    capsys.readouterr()
    out, _ = show(capsys)
    assert "quality best, K = N/2" in out
    found = re.search(r"(AR|diffusion) from (\d+) tokens on", summary_of(out))
    assert found, out
    n = int(found.group(2))
    winner = found.group(1).lower()
    loser = "ar" if winner == "diffusion" else "diffusion"
    assert 30 < n < 449 and (routed_engine(capsys, n - 1), routed_engine(capsys, n)) == (loser, winner)


def test_no_crossover_in_range_is_said(
    draft_model: str, sharpen_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    calibrated(sharpen_home, draft_model, 1.0, 0.0005)  # a second a pass: AR wins at every length
    out, _ = show(capsys)
    assert "AR is estimated faster at every length from 30 to 4096 tokens" in summary_of(out)
    assert "  no crossover: AR faster throughout" in out  # the plot's legend
    assert "faster from" not in out
    assert routed_engine(capsys, 30) == routed_engine(capsys, 1024) == "ar"


def test_without_a_draft_model_only_ar_is_drawn(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "set", "models.draft", ""]) == 0
    capsys.readouterr()
    out, _ = show(capsys)
    assert f"AR: {AR_MODEL}" in out and "⢕" not in out
    assert "only the AR engine's model is present" in summary_of(out)
    assert routed_engine(capsys, 400) == "ar"


def test_plot_writes_the_same_plot_as_svg(
    draft_model: str, sharpen_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    calibrated(sharpen_home, draft_model, 0.02, 0.0005)
    target = tmp_path / "plots" / "costs.svg"
    out, err = show(capsys, "--plot", str(target))
    assert f"wrote {target}" in err and "AR faster from 449 tokens" in out
    root = ET.parse(target).getroot()
    assert root.tag == f"{SVG}svg"
    text = "".join("".join(node.itertext()) for node in root.iter(f"{SVG}text")).replace("\xa0", " ")
    for expected in (f"AR: {AR_MODEL}", f"diffusion: {draft_model}", "AR faster from 449 tokens", "▚", "⢕", "│"):
        assert expected in text, expected
    assert not list(tmp_path.joinpath("plots").glob(".*.tmp"))  # written through a temporary file, renamed


@pytest.mark.parametrize("name", ["costs.png", "costs", "costs.svg.txt"])
def test_plot_refuses_other_extensions(name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["calibrate", "--show", "--plot", str(tmp_path / name)])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("sharpen: error: argument --plot: ") and ".svg" in lines[0]
    assert not (tmp_path / name).exists()


def test_the_cli_still_starts_without_plotext() -> None:
    code = "import sys, app.cli; print('plotext' in sys.modules, 'rich.console' in sys.modules)"
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=root).stdout
    assert out.split()[0] == "False"
