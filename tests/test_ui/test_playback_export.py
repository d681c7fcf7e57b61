"""The playback screen exports the trace it shows: `e` asks for a path, a thread writes the recording."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

from textual.widgets import Input
from ui_support import AppFactory

from ui.screens.dialogs import PathScreen
from ui.screens.playback import PlaybackScreen


async def export_from_playback(make_app: AppFactory, trace: Path, target: Path) -> list[str]:
    """Open playback of `trace`, export to `target`; return the notifications shown."""
    app = make_app(trace=trace)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, PlaybackScreen)
        await pilot.press("e")
        await pilot.pause()
        dialog = app.screen
        assert isinstance(dialog, PathScreen)
        path_input = dialog.query_one("#path", Input)
        assert path_input.value.endswith(".svg"), "an SVG is suggested"
        path_input.value = str(target)
        await pilot.press("enter")
        await pilot.pause()
        assert app.screen is screen
        await app.workers.wait_for_complete()
        await pilot.pause()
        return [notification.message for notification in app._notifications]


async def test_e_exports_the_shown_trace(make_app: AppFactory, fixed_trace: Path, tmp_path: Path) -> None:
    target = tmp_path / "out" / "refinement.svg"
    messages = await export_from_playback(make_app, fixed_trace, target)
    root = ET.parse(target).getroot()
    groups = [g for g in root.iter("{http://www.w3.org/2000/svg}g") if "frame" in (g.get("class") or "")]
    assert len(groups) == 4, "a frame for each of the trace's passes"
    assert any(str(target) in message for message in messages), messages


async def test_export_as_asciicast(make_app: AppFactory, fixed_trace: Path, tmp_path: Path) -> None:
    target = tmp_path / "refinement.cast"
    await export_from_playback(make_app, fixed_trace, target)
    assert json.loads(target.read_text().splitlines()[0])["version"] == 2


async def test_an_unknown_format_is_reported(make_app: AppFactory, fixed_trace: Path, tmp_path: Path) -> None:
    target = tmp_path / "refinement.png"
    messages = await export_from_playback(make_app, fixed_trace, target)
    assert not target.exists()
    assert any("cannot export" in message and ".gif" in message for message in messages), messages
