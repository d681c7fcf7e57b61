"""An AR draft keeps a trace too (each token as it arrived), and `sharpen replay --export` plays it as it was
written: left to right, a frame a token, "token 57 of 128", at the pace it was written. A real draft of the
embedded AR model."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from PIL import Image, ImageSequence

from app.cli import main
from app.recording import cast, screens, svg
from app.recording.frames import COLOURS, STYLES, Mark, written_frames
from engines.trace import TokenArrival, load_trace

SVG = "{http://www.w3.org/2000/svg}"
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
SIZE = ["--width", "60", "--height", "12"]
# How the cast starts the newest token: its colour, bold (the TUI's style for it).
WRITTEN_ANSI = cast._ansi("x", STYLES[Mark.WRITTEN]).split("x")[0]


@pytest.fixture
def ar_trace_path(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    assert main(["config", "set", "router.auto_calibrate", "false"]) == 0
    capsys.readouterr()
    path = tmp_path / "ar.trace.jsonl"
    args = ["draft", "Write a short note to Sam declining Friday's meeting.", "--tokens", "24", "--engine", "ar"]
    assert main([*args, "--trace", str(path), "--json"]) == 0
    reply = json.loads(capsys.readouterr().out)
    assert reply["engine"] == "ar" and reply["trace"] == str(path)
    return path


def test_an_ar_draft_keeps_each_token_as_it_arrived(ar_trace_path: Path) -> None:
    trace = load_trace(ar_trace_path)
    assert trace.engine == "ar" and trace.passes == [] and trace.header.canvas_length == 24
    # A checked draft's kept try may carry an earlier draft on: the text it was given arrives as a token of its
    # own, and the stats count what the model generated in that try.
    assert trace.stats is not None and 0 < trace.stats.generated_tokens <= 24 and trace.tokens
    assert "".join(token.text for token in trace.tokens) == trace.text
    times = [token.elapsed_s for token in trace.tokens]
    # Timed from the call, as the engine times its stats (which starts its clock a moment later, inside the call).
    assert times == sorted(times) and 0 < times[-1] <= trace.stats.total_s + 0.05
    assert [token.index for token in trace.tokens] == sorted(token.index for token in trace.tokens)


def visible_text(data: str) -> str:
    """A cast frame's text without its colours and its status line."""
    return ANSI.sub("", data).rsplit("\r\n", 1)[0].replace("\r\n", "").strip()


def test_the_cast_plays_it_token_by_token_as_it_was_written(
    ar_trace_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "ar.cast"
    assert main(["replay", str(ar_trace_path), "--export", str(out), *SIZE]) == 0
    trace = load_trace(ar_trace_path)
    assert f"wrote {out}: {len(trace.tokens)} tokens" in capsys.readouterr().err
    lines = out.read_text(encoding="utf-8").splitlines()
    assert "AR, token by token" in json.loads(lines[0])["title"]
    events = [json.loads(line) for line in lines[1:-1]]
    assert len(events) == len(trace.tokens), "one redraw a token"
    # At the pace it was written: each token when it arrived (the first from the start).
    assert [time for time, _, _ in events] == [0.0, *(round(t.elapsed_s, 6) for t in trace.tokens[1:])]
    total = trace.stats.generated_tokens if trace.stats else 0
    shown = [visible_text(data) for _, _, data in events]
    for number, (data, token) in enumerate(zip([d for _, _, d in events], trace.tokens, strict=True)):
        assert f"token {min(token.index + 1, total)} of {total}" in ANSI.sub("", data)
        # Left to right: each frame is the text so far, its newest token marked.
        so_far = "".join(t.text for t in trace.tokens[: number + 1])
        assert shown[number].replace(" ", "") == so_far.replace("\n", "").replace(" ", "")
        if token.text.strip():
            assert WRITTEN_ANSI in data, "the newest token in its colour"


def test_the_svg_has_a_frame_a_token_with_the_newest_marked(
    ar_trace_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "ar.svg"
    assert main(["replay", str(ar_trace_path), "--export", str(out), "--speed", "20", *SIZE]) == 0
    trace = load_trace(ar_trace_path)
    root = ET.parse(out).getroot()
    groups = [g for g in root.iter(f"{SVG}g") if "frame" in (g.get("class") or "").split()]
    assert [g.get("data-token") for g in groups] == [str(n + 1) for n in range(len(trace.tokens))]
    css = "".join(root.find(f"{SVG}style").itertext())  # type: ignore[union-attr]
    assert f".{svg.SVG_CLASSES[Mark.WRITTEN]}{{fill:{COLOURS[Mark.WRITTEN]};font-weight:bold}}" in css
    length = (len(trace.tokens) - 1) / 20 + screens.HOLD_S  # --speed: tokens a second
    assert f"animation:k1 {svg._number(length)}s" in css
    for group, token in zip(groups, trace.tokens, strict=True):
        newest = [t.text or "" for t in group.iter(f"{SVG}text") if t.get("class") == svg.SVG_CLASSES[Mark.WRITTEN]]
        assert "".join(newest).strip() == token.text.replace("\n", "").strip()  # a token may span lines
    last = "".join(t.text or "" for t in groups[-1].iter(f"{SVG}text") if t.get("class") != svg.STATUS_CLASS)
    assert last.replace(" ", "") == (trace.text or "").replace("\n", "").replace(" ", "")


def test_the_gif_keeps_the_pace_and_leaves_out_what_no_one_could_see(
    ar_trace_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "ar.gif"
    assert main(["replay", str(ar_trace_path), "--export", str(out), *SIZE]) == 0
    trace = load_trace(ar_trace_path)
    with Image.open(out) as image:
        durations = [picture.info["duration"] for picture in ImageSequence.Iterator(image)]
    assert 1 <= len(durations) <= len(trace.tokens)
    assert all(duration >= 20 for duration in durations[:-1]), "a GIF cannot show a picture for less"
    written = trace.tokens[-1].elapsed_s
    assert sum(durations) == pytest.approx((written + screens.HOLD_S) * 1000, abs=10 * len(durations))


def test_frames_number_the_tokens_the_engine_generated() -> None:
    """A token whose text the engine held back (it might have begun a stop string) arrives with the next one's."""
    tokens = [TokenArrival(0, 1, "Hi", 0.1), TokenArrival(2, 3, " Sam", 0.2), TokenArrival(3, -1, "!", 0.25)]
    drawn = written_frames(tokens, 3)
    assert [f.step for f in drawn] == ["token 1 of 3", "token 3 of 3", "token 3 of 3"]
    assert [[c.mark for c in f.cells] for f in drawn] == [
        [Mark.WRITTEN],
        [Mark.SETTLED, Mark.WRITTEN],
        [Mark.SETTLED, Mark.SETTLED, Mark.WRITTEN],
    ]
    assert drawn[-1].text == "Hi Sam!"
