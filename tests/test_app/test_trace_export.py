"""`sharpen replay TRACE --export FILE`: a draft's passes as an asciicast, an animated SVG or a GIF.

The trace is a real draft of a tiny real diffusion GGUF; every check is made against the editor's own
drawing of the same passes (ui/refinement.py), so the recordings' colours cannot drift from it.
"""

from __future__ import annotations

import itertools
import json
import re
import subprocess
import sys
import unicodedata
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from PIL import Image, ImageSequence
from rich.style import Style

from app.cli import main
from app.recording import cast, gif, screens, svg
from app.recording.frames import COLOURS, DIM_FOREGROUND, FOREGROUND, STYLES, Mark, confidence_mark, frame
from engines.events import Pass
from engines.trace import Trace, load_trace
from ui.refinement import render_pass

SPEED = 4.0
SIZE = ["--width", "80", "--height", "40"]
SVG = "{http://www.w3.org/2000/svg}"
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
SNAPSHOT = Path(__file__).parents[1] / "test_ui/__snapshots__/test_snapshots/test_draft_panel_mid_refinement.svg"


@pytest.fixture
def trace_path(tiny_cacheable_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    """A real draft's trace: 32 tokens in 8 passes of a tiny diffusion model."""
    assert main(["config", "set", "models.draft", str(tiny_cacheable_path)]) == 0
    assert main(["config", "set", "router.policy", "quality"]) == 0
    path = tmp_path / "draft.trace.jsonl"
    args = ["draft", "Write a note.", "--tokens", "32", "--block-length", "16", "--steps", "8", "--trace", str(path)]
    assert main(args) == 0
    capsys.readouterr()
    return path


def export(trace: Path, out: Path, capsys: pytest.CaptureFixture[str]) -> Trace:
    assert main(["replay", str(trace), "--export", str(out), "--speed", str(SPEED), *SIZE]) == 0
    assert f"wrote {out}" in capsys.readouterr().err
    return load_trace(trace)


def visible(text: str) -> str:
    """What a text shows, whitespace and control characters aside (the grid wraps and expands tabs)."""
    return "".join(c for c in text if not c.isspace() and unicodedata.category(c) != "Cc")


def editor_colours(event: Pass) -> list[tuple[str, str]]:
    """Each visible character the editor draws for a pass, with its colour (dim as the TUI draws it)."""
    drawn = render_pass(event)
    colours: list[str] = [FOREGROUND] * len(drawn.plain)
    for span in drawn.spans:
        style = Style.parse(str(span.style))
        colour = DIM_FOREGROUND if style.dim else style.color.triplet.hex if style.color and style.color.triplet else ""
        colours[span.start : span.end] = [colour] * (span.end - span.start)
    return [(c, colour) for c, colour in zip(drawn.plain, colours, strict=True) if visible(c)]


def test_the_editor_and_the_recordings_share_one_frame_model() -> None:
    assert [confidence_mark(c) for c in (0.1, 0.29, 0.3, 0.69, 0.7, 1.0)] == [
        Mark.LOW,
        Mark.LOW,
        Mark.MEDIUM,
        Mark.MEDIUM,
        Mark.HIGH,
        Mark.HIGH,
    ]
    buckets = [STYLES[confidence_mark(c)] for c in (0.1, 0.5, 0.9)]
    assert buckets == ["bold #ff5f5f", "bold #ffaf00", "bold #5fd75f"]
    # The dim placeholder as the TUI draws it (its snapshot of a draft mid-refinement) is the recordings' colour.
    snapshot = SNAPSHOT.read_text()
    styles = dict(re.findall(r"\.(terminal-r\d+) \{ fill: (#[0-9a-f]{6})", snapshot))
    placeholders = {styles[cls] for cls in re.findall(r'<text class="(terminal-r\d+)"[^>]*>░</text>', snapshot)}
    assert placeholders == {COLOURS[Mark.MASKED]}


def test_cast_plays_in_asciinema_one_redraw_a_pass(
    trace_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "draft.cast"
    trace = export(trace_path, out, capsys)
    lines = out.read_text(encoding="utf-8").splitlines()
    header = json.loads(lines[0])
    assert header["version"] == 2 and header["width"] == 80 and header["height"] == 40
    assert isinstance(header["timestamp"], int) and header["timestamp"] > 0
    assert "Write a note." in header["title"]
    events = [json.loads(line) for line in lines[1:]]
    times = [event[0] for event in events]
    assert all(kind == "o" and isinstance(data, str) for _, kind, data in events)
    assert times == sorted(times) and len(set(times)) == len(times), "times increase"
    redraws = [data for _, _, data in events if cast.CLEAR in data]
    assert len(redraws) == len(trace.passes) == 8, "one full redraw a pass"
    assert times[: len(trace.passes)] == [i / SPEED for i in range(len(trace.passes))]
    assert times[-1] == pytest.approx(times[-2] + screens.HOLD_S), "the last pass is held"
    for data, event in zip(redraws, trace.passes, strict=True):
        assert data.count(cast.CLEAR) == 1
        assert f"pass {event.index + 1} of 8" in ANSI.sub("", data)

    played = subprocess.run(
        [sys.executable, "-m", "asciinema", "cat", str(out)], capture_output=True, text=True, timeout=60
    )
    assert played.returncode == 0, played.stderr
    last = ANSI.sub("", played.stdout.split(cast.CLEAR)[-1])
    shown, _ = last.rsplit("pass 8 of 8", 1)
    final = "".join(trace.passes[-1].pieces)
    assert visible(shown) == visible(final), "the last frame shows the final pass's text"
    assert visible(final).startswith(visible(trace.text or "")) and trace.text


def svg_frames(root: ET.Element) -> list[ET.Element]:
    return [g for g in root.iter(f"{SVG}g") if "frame" in (g.get("class") or "").split()]


def test_svg_animates_every_pass_in_order_in_the_editors_colours(
    trace_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "draft.svg"
    trace = export(trace_path, out, capsys)
    root = ET.parse(out).getroot()
    groups = svg_frames(root)
    assert [g.get("data-pass") for g in groups] == [str(i + 1) for i in range(len(trace.passes))]
    assert root.find(f"{SVG}script") is None, "no script: GitHub strips it"

    # The timing: each frame shown from where the one before it ends, in order, the last held to the loop's end.
    css = "".join(root.find(f"{SVG}style").itertext())  # type: ignore[union-attr]
    length = (len(trace.passes) - 1) / SPEED + screens.HOLD_S
    shown: list[tuple[float, float]] = []
    for index, group in enumerate(groups):
        assert f"f{index}" in (group.get("class") or "").split()
        rule = re.search(rf"\.f{index}\{{animation:k{index} ([\d.]+)s steps\(1,end\) infinite\}}", css)
        assert rule and float(rule.group(1)) == pytest.approx(length)
        frames = re.search(rf"@keyframes k{index}\{{((?:[\d.]+%\{{opacity:[01]\}})+)\}}", css)
        assert frames, f"frame {index} has its keyframes"
        steps = [(float(at), opacity == "1") for at, opacity in re.findall(r"([\d.]+)%\{opacity:([01])\}", frames[1])]
        assert [at for at, _ in steps] == sorted(at for at, _ in steps)
        start = next(at for at, on in steps if on)
        end = next((at for at, on in steps if not on and at > start), 100.0)
        assert all(on for at, on in steps if start <= at < end), "shown once, without a gap"
        assert start == pytest.approx(100 * index / SPEED / length, abs=1e-3)
        shown.append((start, end))
    assert shown[0][0] == 0 and shown[-1][1] == 100
    assert all(a[1] == pytest.approx(b[0]) for a, b in itertools.pairwise(shown)), "frames follow each other"

    # The colours: every character of every frame in the colour the editor draws it in.
    colours = dict(re.findall(r"\.([a-z]+)\{fill:(#[0-9a-f]{6})", css))
    assert {colours[svg.SVG_CLASSES[mark]] for mark in Mark} == set(COLOURS.values())
    for group, event in zip(groups, trace.passes, strict=True):
        texts = [t for t in group.iter(f"{SVG}text") if t.get("class") != svg.STATUS_CLASS]
        texts.sort(key=lambda t: (float(t.get("y", 0)), float(t.get("x", 0))))
        drawn = [(c, colours[t.get("class", "")]) for t in texts for c in (t.text or "") if visible(c)]
        assert drawn == editor_colours(event)
    final = "".join(
        c for t in svg_frames(root)[-1].iter(f"{SVG}text") for c in (t.text or "") if t.get("class") != "st"
    )
    assert visible(final) == visible("".join(trace.passes[-1].pieces))
    assert visible(final).startswith(visible(trace.text or ""))


def test_gif_has_a_frame_a_pass_at_the_speed(
    trace_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "draft.gif"
    trace = export(trace_path, out, capsys)
    with Image.open(out) as image:
        assert image.format == "GIF"
        pictures = [(picture.info["duration"], picture.convert("RGB")) for picture in ImageSequence.Iterator(image)]
    assert len(pictures) == len(trace.passes)
    durations = [duration for duration, _ in pictures]
    assert durations == [1000 / SPEED] * (len(trace.passes) - 1) + [screens.HOLD_S * 1000]
    first: list[tuple[int, tuple[int, int, int]]] = pictures[0][1].getcolors(1 << 16) or []  # type: ignore[assignment]
    hexes = {"#{:02x}{:02x}{:02x}".format(*colour) for _, colour in first}
    assert COLOURS[Mark.MASKED] in hexes, "the first pass's masks in the editor's dim colour"
    marks = {cell.mark for cell in frame(trace.passes[0]).cells}
    assert {COLOURS[m] for m in marks if m.fresh} <= hexes, "the first pass's commits in their confidence colours"


def test_gif_without_a_system_font(
    trace_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A bare machine: no monospace font installed, PIL's own font placed on the grid."""
    monkeypatch.setattr(gif, "MONOSPACE_FONTS", ())
    assert gif.gif_fonts()[2] is False
    out = tmp_path / "bare.gif"
    trace = export(trace_path, out, capsys)
    with Image.open(out) as image:
        assert sum(1 for _ in ImageSequence.Iterator(image)) == len(trace.passes)


@pytest.mark.parametrize("name", ["draft.png", "draft"])
def test_an_unknown_format_is_one_error_line(
    trace_path: Path, tmp_path: Path, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / name
    assert main(["replay", str(trace_path), "--export", str(out)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("sharpen: error: ")
    assert ".cast" in err and ".svg" in err and ".gif" in err
    assert not out.exists()


def test_a_bad_size_is_refused(trace_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay", str(trace_path), "--export", str(tmp_path / "x.svg"), "--width", "5"]) == 2
    assert capsys.readouterr().err.startswith("sharpen: error: argument --width")


def test_a_tall_text_scrolls_to_the_passes_commits(trace_path: Path) -> None:
    trace = load_trace(trace_path)
    small = screens.ExportOptions(width=20, height=4)
    laid_out = screens.screens(trace, small)
    assert all(len(screen.rows) <= 3 for screen in laid_out)
    for screen, event in zip(laid_out, trace.passes, strict=True):
        fresh = frame(event).cells
        if any(cell.mark.fresh and visible(cell.text) for cell in fresh):
            assert any(run.mark.fresh for row in screen.rows for run in row), "this pass's commits are in view"


def test_the_grid_wraps_as_the_editor_does() -> None:
    pieces = ("Dear", " Sam", ",\n", "thanks", " for", " the", " notes", "\t", "x", "", "abcdefghijklmno")
    masked = tuple(piece == "" for piece in pieces)
    event = Pass(0, tuple(range(len(pieces))), pieces, masked, (1,), (0.9,), 0, (0, len(pieces)), 0.0)
    rows = screens.layout(frame(event), 12)
    assert ["".join(char for char, _, _ in row) for row in rows] == [
        "Dear Sam,",
        "thanks for ",
        "the notes",
        "x░abcdefghij",
        "klmno",
    ]
    assert [mark for _, mark, _ in rows[0]] == [Mark.SETTLED] * 4 + [Mark.HIGH] * 4 + [Mark.SETTLED]
