"""SVG snapshots of the main screens at 80x24 with animations off (pytest-textual-snapshot)."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Protocol

import pytest
from textual.pilot import Pilot
from textual.widgets import Input
from ui_support import AppFactory, make_config

from app.orchestration import model_manager
from app.storage.draft_history import PastDraft
from engines.trace import load_trace
from models.fit import Machine
from ui.app import SharpenApp
from ui.screens.files import OpenFileScreen
from ui.screens.history import HistoryScreen

SIZE = (80, 24)
TEXT = "Dear Sam,\n\nThanks for the notes from Tuesday. I went through the list this morning."


class SnapCompare(Protocol):
    """The `snap_compare` fixture's function, as these tests call it (pytest-textual-snapshot ships no types)."""

    def __call__(
        self,
        app: SharpenApp,
        *,
        terminal_size: tuple[int, int],
        press: Iterable[str] = (),
        run_before: Callable[[Pilot], Awaitable[None]] | None = None,
    ) -> bool: ...


async def hold_input_cursors(app: SharpenApp, pilot: Pilot) -> None:
    """The screen's text fields keep their cursors drawn: a blink at 0.5 s hides them on a busy machine."""
    for field in app.screen.query(Input):
        field.cursor_blink = False
    await pilot.pause()


def editor_app(make_app: AppFactory) -> tuple[SharpenApp, Callable[[Pilot], Awaitable[None]]]:
    app = make_app(config=make_config(autocomplete=False))

    async def prepare(pilot: Pilot) -> None:
        app.editor.cursor_blink = False
        app.editor.load_text(TEXT)
        await pilot.pause()

    return app, prepare


def test_main_screen(snap_compare: SnapCompare, make_app: AppFactory) -> None:
    app, prepare = editor_app(make_app)
    assert snap_compare(app, terminal_size=SIZE, run_before=prepare)


def test_help_screen(snap_compare: SnapCompare, make_app: AppFactory) -> None:
    app, prepare = editor_app(make_app)
    assert snap_compare(app, terminal_size=SIZE, run_before=prepare, press=["f1"])


def test_models_screen(snap_compare: SnapCompare, make_app: AppFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    # The "fits" column depends on the machine: draw it for a fixed one (16 GiB free, no GPU).
    monkeypatch.setattr(model_manager, "this_machine", lambda: Machine(16 * 1024**3, 24 * 1024**3, 0, ""))
    app, prepare = editor_app(make_app)
    assert snap_compare(app, terminal_size=SIZE, run_before=prepare, press=["f2"])


def test_draft_panel_mid_refinement(snap_compare: SnapCompare, make_app: AppFactory, fixed_trace: Path) -> None:
    app = make_app(config=make_config(autocomplete=False))
    app.animation_level = "basic"  # this pass's commits coloured by confidence (drawing is not time-based)
    trace = load_trace(fixed_trace)

    async def prepare(pilot: Pilot) -> None:
        app.editor.cursor_blink = False
        app.editor.load_text(TEXT)
        app.panel.open("Draft: Write a list · 16 tokens")
        app.panel.view.current = trace.passes[1]
        await pilot.pause()

    assert snap_compare(app, terminal_size=SIZE, run_before=prepare)


def test_playback_screen(snap_compare: SnapCompare, make_app: AppFactory, fixed_trace: Path) -> None:
    app = make_app(config=make_config(autocomplete=False), trace=fixed_trace)
    assert snap_compare(app, terminal_size=SIZE, press=["home", "right"])


def test_rewrite_dialog(snap_compare: SnapCompare, make_app: AppFactory) -> None:
    app, prepare = editor_app(make_app)

    async def select_and_ask(pilot: Pilot) -> None:
        await prepare(pilot)
        app.editor.move_cursor((2, 0))
        app.editor.move_cursor((2, 30), select=True)
        await pilot.press("ctrl+r")
        await pilot.press(*"shorter")
        await hold_input_cursors(app, pilot)

    assert snap_compare(app, terminal_size=SIZE, run_before=select_and_ask)


def past(number: int, created: str, kind: str, instruction: str, engine: str, text: str) -> PastDraft:
    return PastDraft(number, "untitled", created, kind, instruction, engine, "sharpen-draft", {}, {}, text)


def test_past_drafts_screen(snap_compare: SnapCompare, make_app: AppFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two past drafts of an untitled document, their times drawn in UTC."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    app, prepare = editor_app(make_app)
    drafts = [
        past(2, "2026-11-30T09:15:00+00:00", "infill", "more formal", "diffusion", "We would be delighted to attend."),
        past(1, "2026-11-29T17:40:00+00:00", "draft", "decline [politely]", "ar", "Thanks, but I cannot make Friday."),
    ]

    async def open_history(pilot: Pilot) -> None:
        await prepare(pilot)
        app.push_screen(HistoryScreen(drafts))
        await pilot.pause()

    assert snap_compare(app, terminal_size=SIZE, run_before=open_history)


def test_find_bar(snap_compare: SnapCompare, make_app: AppFactory) -> None:
    """The find bar open with its replace row: every match highlighted, the second one selected."""
    app, prepare = editor_app(make_app)

    async def find(pilot: Pilot) -> None:
        await prepare(pilot)
        await pilot.press("ctrl+h", *"the", "enter")
        await hold_input_cursors(app, pilot)

    assert snap_compare(app, terminal_size=SIZE, run_before=find)


MARKDOWN = (
    "# Notes for Sam\n\n- the **budget** review moved to *Friday*\n- [agenda](https://example.org)\n\n`10am`, room 4\n"
)


def test_markdown_highlighting(snap_compare: SnapCompare, make_app: AppFactory, tmp_path: Path) -> None:
    """A `.md` document, highlighted by Textual's tree-sitter Markdown grammar."""
    notes = tmp_path / "notes.md"
    notes.write_text(MARKDOWN)
    app = make_app(config=make_config(autocomplete=False), document=notes)

    async def prepare(pilot: Pilot) -> None:
        app.editor.cursor_blink = False
        await pilot.pause()

    assert snap_compare(app, terminal_size=SIZE, run_before=prepare)


def test_light_theme(snap_compare: SnapCompare, make_app: AppFactory) -> None:
    """The main screen in the theme config.toml names."""
    app = make_app(config=make_config(autocomplete=False, theme="textual-light"))

    async def prepare(pilot: Pilot) -> None:
        app.editor.cursor_blink = False
        app.editor.load_text(TEXT)
        await pilot.pause()

    assert snap_compare(app, terminal_size=SIZE, run_before=prepare)


def test_open_file_dialog(snap_compare: SnapCompare, make_app: AppFactory) -> None:
    """The open dialog with its recent files, newest first."""
    app, prepare = editor_app(make_app)
    recent = [Path("/home/writer/letters/sam.md"), Path("/home/writer/notes.txt")]

    async def open_dialog(pilot: Pilot) -> None:
        await prepare(pilot)
        app.push_screen(OpenFileScreen(recent))
        await pilot.pause()
        await hold_input_cursors(app, pilot)

    assert snap_compare(app, terminal_size=SIZE, run_before=open_dialog)
