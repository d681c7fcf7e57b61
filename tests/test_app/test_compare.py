"""`sharpen compare PROMPT`: both engines on the same request, one after the other, their figures beside the router's
choice; `--export` writes both drafts side by side on one timeline, as they happened. The real embedded AR model
and a tiny real diffusion GGUF."""

from __future__ import annotations

import itertools
import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from PIL import Image, ImageSequence

from app.cli import main
from app.recording import cast, screens, svg
from app.recording.frames import MASK_GLYPH, Mark
from app.recording.side_by_side import DIVIDER

PROMPT = "Write a short note to Sam declining Friday's meeting."
SVG = "{http://www.w3.org/2000/svg}"
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


@pytest.fixture
def both_engines(tiny_cacheable_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    assert main(["config", "set", "models.draft", str(tiny_cacheable_path)]) == 0
    assert main(["config", "set", "router.auto_calibrate", "false"]) == 0
    capsys.readouterr()
    return tiny_cacheable_path


def test_compare_prints_both_drafts_and_the_routers_choice(
    both_engines: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["compare", PROMPT, "--tokens", "32"]) == 0
    out = capsys.readouterr().out
    router = out.splitlines()[0]
    assert re.match(r"the router would choose (AR|diffusion) \(", router), router
    assert re.search(r"^  AR +estimated +[\d.]+ s ", out, re.M) and re.search(
        r"^  diffusion +estimated +[\d.]+ s ", out, re.M
    )
    assert re.search(r"^AR \(sharpen-write\): \d+ tokens in [\d.]+ s, [\d.]+ tokens/s, \d+ steps$", out, re.M)
    assert re.search(
        r"^diffusion \(tiny-cacheable.gguf\): \d+ tokens in [\d.]+ s, [\d.]+ tokens/s, 8 passes$", out, re.M
    )
    assert re.search(
        r"^measured: (AR|diffusion) [\d.]+ s .* against (AR|diffusion) [\d.]+ s .*; the router would choose", out, re.M
    )


def test_repeated_rounds_interleave_the_engines(both_engines: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", PROMPT, "--tokens", "32", "--repeat", "2", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    runs = report["runs"]
    assert [(run["round"], run["engine"]) for run in runs] == [(1, "ar"), (1, "diffusion"), (2, "diffusion"), (2, "ar")]
    for run in runs:
        assert run["text"] and run["seconds"] > 0 and run["tokens"] > 0
        assert run["tokens_per_s"] == pytest.approx(run["tokens"] / run["seconds"], rel=0.01)
    assert all(run["passes"] == 8 for run in runs if run["engine"] == "diffusion"), "K = N/4 at quality balanced"
    assert all(run["steps"] == run["tokens"] for run in runs if run["engine"] == "ar"), "a token a step"
    assert report["tokens"] == 32 and set(report["router"]["estimates"]) == {"ar", "diffusion"}
    assert report["router"]["engine"] in ("ar", "diffusion") and report["router"]["rule"] != "forced"
    assert set(report["median"]) == {"ar", "diffusion"} and report["export"] is None


def svg_frames(path: Path) -> tuple[list[ET.Element], str]:
    root = ET.parse(path).getroot()
    groups = [g for g in root.iter(f"{SVG}g") if "frame" in (g.get("class") or "").split()]
    return groups, "".join(root.find(f"{SVG}style").itertext())  # type: ignore[union-attr]


def frame_start(css: str, index: int) -> float:
    """When frame `index` is first shown, in seconds (its keyframes are percentages of the loop)."""
    length = re.search(rf"\.f{index}\{{animation:k{index} ([\d.]+)s", css)
    steps = re.search(rf"@keyframes k{index}\{{(.*?)\}}\}}", css)
    assert length and steps
    shown = [float(at) for at, on in re.findall(r"([\d.]+)%\{opacity:([01])", steps[1] + "}") if on == "1"]
    return shown[0] / 100 * float(length[1])


def test_export_svg_shows_both_engines_side_by_side_as_they_happened(
    both_engines: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "both.svg"
    assert main(["compare", PROMPT, "--tokens", "32", "--json", "--export", str(out)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["export"] == str(out)
    ar_run, diffusion_run = report["runs"]
    groups, css = svg_frames(out)
    ar_steps = [int(g.get("data-ar-token", -1)) for g in groups]
    passes = [int(g.get("data-diffusion-pass", -1)) for g in groups]
    # The first frame is both drafts before their first step; then each frame is a step of either, in order,
    # until both have finished: N tokens against K passes.
    assert ar_steps[0] == passes[0] == 0
    assert ar_steps == sorted(ar_steps) and passes == sorted(passes)
    assert passes[-1] == diffusion_run["passes"] == 8 and 1 < ar_steps[-1] <= ar_run["tokens"]
    progress = [a + b for a, b in zip(ar_steps, passes, strict=True)]
    assert all(later > earlier for earlier, later in itertools.pairwise(progress)), "each frame a step of either"

    mid = svg.PADDING + (80 - len(DIVIDER)) // 2 * svg.CELL_WIDTH
    for index, group in enumerate(groups):
        texts = [t for t in group.iter(f"{SVG}text") if t.get("class") != svg.STATUS_CLASS]
        ordered = sorted(texts, key=lambda t: (float(t.get("y", 0)), float(t.get("x", 0))))
        titles = [t.text for t in ordered if t.get("y") == ordered[0].get("y")]
        assert titles == ["AR · sharpen-write", DIVIDER, "diffusion · tiny-cacheable.gguf"]
        body = [t for t in ordered if t.get("class") != svg.SVG_CLASSES[Mark.LABEL]]
        right = [t for t in body if float(t.get("x", 0)) > mid]
        left = [t for t in body if float(t.get("x", 0)) < mid]
        if index == 0:
            assert not left, "no AR text before its first token"
            assert {t.get("class") for t in right} == {svg.SVG_CLASSES[Mark.MASKED]}
            assert all(set(t.text or "") <= {MASK_GLYPH} for t in right), "every position masked"
        status = next(t.text or "" for t in group.iter(f"{SVG}text") if t.get("class") == svg.STATUS_CLASS)
        assert re.match(r"[\d.]+ s · AR ", status) and " · diffusion " in status
    last_status = next(t.text or "" for t in groups[-1].iter(f"{SVG}text") if t.get("class") == svg.STATUS_CLASS)
    assert "AR done: " in last_status and "diffusion done: 8 passes in " in last_status

    # At the speed it happened: a frame starts when its step did, from the start of its own draft.
    starts = [frame_start(css, index) for index in range(len(groups))]
    assert starts == sorted(starts) and starts[0] == 0
    statuses = [next(t.text or "" for t in g.iter(f"{SVG}text") if t.get("class") == svg.STATUS_CLASS) for g in groups]
    status_times = [float(status.split(" s · ")[0]) for status in statuses]
    assert starts == pytest.approx(status_times, abs=0.006)
    loop = re.search(r"animation:k0 ([\d.]+)s", css)
    assert loop and float(loop[1]) == pytest.approx(starts[-1] + screens.HOLD_S, abs=0.01)


def test_export_cast_and_gif(both_engines: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    recording = tmp_path / "both.cast"
    assert main(["compare", PROMPT, "--tokens", "32", "--export", str(recording), "--width", "100"]) == 0
    assert f"wrote {recording}: both drafts side by side" in capsys.readouterr().err
    lines = recording.read_text(encoding="utf-8").splitlines()
    assert json.loads(lines[0])["width"] == 100
    frames = [ANSI.sub("", json.loads(line)[2]) for line in lines[1:-1]]
    assert all("AR · sharpen-write" in frame and "diffusion · tiny-cacheable.gguf" in frame for frame in frames)
    assert "diffusion pass 1 of 8" in "".join(frames) and "diffusion done: 8 passes" in frames[-1]
    assert all(cast.CLEAR in json.loads(line)[2] for line in lines[1:-1])
    played = subprocess.run(
        [sys.executable, "-m", "asciinema", "cat", str(recording)], capture_output=True, text=True, timeout=60
    )
    assert played.returncode == 0, played.stderr

    picture = tmp_path / "both.gif"
    assert main(["compare", PROMPT, "--tokens", "32", "--export", str(picture)]) == 0
    with Image.open(picture) as image:
        durations = [frame.info["duration"] for frame in ImageSequence.Iterator(image)]
    assert len(durations) >= 2 and all(duration >= 20 for duration in durations[:-1])


def test_compare_needs_both_engines(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "set", "models.draft", ""]) == 0
    capsys.readouterr()
    assert main(["compare", PROMPT]) == 1
    err = capsys.readouterr().err
    assert err.startswith("sharpen: error: compare needs both engines: no diffusion model is present")
    assert err.count("\n") == 1
