"""Playback, traces, autosave and recovery, saving, models, keys and commands."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from textual.widgets import Input
from ui_support import AppFactory, make_config

from app.recording.frames import frame
from app.storage.config import KeysSection
from engines.trace import load_trace
from ui.refinement import RefinementView
from ui.screens.dialogs import DraftPromptScreen, RecoveryScreen
from ui.screens.help import HelpScreen
from ui.screens.models import ModelsScreen
from ui.screens.playback import PlaybackScreen


async def test_replay_opens_playback_and_steps(make_app: AppFactory, fixed_trace: Path, sharpen_home: Path) -> None:
    app = make_app(trace=fixed_trace)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, PlaybackScreen)
        last = len(screen.trace.passes) - 1
        assert screen.position == last
        await pilot.press("home")
        assert screen.position == 0
        await pilot.press("right", "right")
        assert screen.position == 2
        await pilot.press("left")
        assert screen.position == 1
        view = screen.query_one("#playback-view", RefinementView)
        assert view.current is screen.frames[1] and screen.frames[1].cells == frame(screen.trace.passes[1]).cells
        await pilot.press("plus", "plus", "plus", "space")
        for _ in range(100):
            await pilot.pause(0.05)
            if screen.position == last:
                break
        assert screen.position == last and screen.timer is None, "playback runs to the end and stops"
        await pilot.press("s")
        saved = list((sharpen_home / "data" / "traces").glob("*.jsonl"))
        assert len(saved) == 1 and load_trace(saved[0]).passes == screen.trace.passes
        await pilot.press("escape")
        assert not isinstance(app.screen, PlaybackScreen)


async def test_autosave_and_recovery_after_a_kill(make_app: AppFactory, tmp_path: Path) -> None:
    document = tmp_path / "letter.txt"
    document.write_text("Dear Sam,\n")
    app = make_app(config=make_config(autocomplete=False), document=document)
    async with app.run_test(size=(80, 24)) as pilot:
        assert app.editor.text == "Dear Sam,\n"
        app.editor.move_cursor(app.editor.document.end)
        await pilot.press(*"unsaved words")
        app.files.autosave()  # what the timer does every few seconds
    # The process "dies": the file still has the old text; the autosave has the new.
    assert document.read_text() == "Dear Sam,\n"
    second = make_app(config=make_config(autocomplete=False), document=document)
    async with second.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert isinstance(second.screen, RecoveryScreen)
        await pilot.click("#recover")
        await pilot.pause()
        assert second.editor.text == "Dear Sam,\nunsaved words"
        await pilot.press("ctrl+s")
        assert document.read_text() == "Dear Sam,\nunsaved words"
        assert not second.files.store.autosave_path(document).exists()
    third = make_app(config=make_config(autocomplete=False), document=document)
    async with third.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert not isinstance(third.screen, RecoveryScreen), "nothing left to recover after a save"


async def test_the_autosave_timer_runs(make_app: AppFactory, tmp_path: Path) -> None:
    document = tmp_path / "notes.txt"
    app = make_app(config=make_config(autocomplete=False, autosave_s=0.5), document=document)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press(*"typed")
        autosave = app.files.store.autosave_path(document)
        for _ in range(40):
            await pilot.pause(0.05)
            if autosave.exists():
                break
        assert autosave.exists() and app.files.store.recovery(document) is not None


async def test_discarding_a_recovery(make_app: AppFactory, tmp_path: Path) -> None:
    document = tmp_path / "letter.txt"
    app = make_app(config=make_config(autocomplete=False), document=document)
    app.files.store.autosave(document, "lost words")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.click("#discard")
        await pilot.pause()
        assert app.editor.text == "" and app.files.store.recovery(document) is None


async def test_keys_can_be_remapped_in_config(make_app: AppFactory) -> None:
    config = dataclasses.replace(
        make_config(autocomplete=False), keys=dataclasses.replace(KeysSection(), draft="ctrl+g")
    )
    app = make_app(config=config)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("ctrl+d")
        assert not isinstance(app.screen, DraftPromptScreen)
        await pilot.press("ctrl+g")
        assert isinstance(app.screen, DraftPromptScreen)
        await pilot.press("escape")
        assert not isinstance(app.screen, DraftPromptScreen)


async def test_help_models_and_commands(make_app: AppFactory) -> None:
    app = make_app(config=make_config(autocomplete=False))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("f1")
        assert isinstance(app.screen, HelpScreen)
        names = {row[0] for row in app.screen.keys}
        assert {"draft", "accept_suggestion", "playback", "quit"} <= names
        await pilot.press("escape")
        await pilot.press("f2")
        assert isinstance(app.screen, ModelsScreen)
        model_names = [m.name for m in app.screen.models]
        assert model_names[:2] == ["smollm2-135m-instruct", "sharpen-draft"]
        assert {"llada-8b-instruct-q4km", "dream-7b-instruct-q4km", "llada-8b-instruct"} <= set(model_names)
        await pilot.press("escape")
        titles = {command.title for command in app.get_system_commands(app.screen)}
        assert {"Draft at the cursor", "Rewrite the selection", "Play back the last draft", "Load a trace"} <= titles


async def test_save_as_for_an_untitled_document(make_app: AppFactory, tmp_path: Path) -> None:
    app = make_app(config=make_config(autocomplete=False))
    target = tmp_path / "new.txt"
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press(*"fresh text", "ctrl+s")
        await pilot.pause()
        app.screen.query_one("#path", Input).value = str(target)
        await pilot.press("enter")
        await pilot.pause()
        assert target.read_text() == "fresh text" and app.files.document == target


async def test_models_screen_switches_what_serves_drafts(
    make_app: AppFactory, tiny_cacheable_path: Path, sharpen_home: Path
) -> None:
    app = make_app(config=make_config(autocomplete=False))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("f2")
        await pilot.press("d")  # the only catalogue model is autoregressive: refused, config untouched
        await pilot.pause()
        assert app.service.config.models.draft == ""
        assert any("not a diffusion model" in n.message for n in app._notifications)
        app.service.use_model("draft", str(tiny_cacheable_path))
        assert app.service.config.models.draft == str(tiny_cacheable_path)
        assert str(tiny_cacheable_path) in (sharpen_home / "config" / "config.toml").read_text()
        assert "diffusion" in app.service.routing.present_engines()
