"""The keys writers expect (#31): Ctrl+Home / Ctrl+End, find and replace, open (with the recent files) and
save as, word counts in the status bar, Markdown highlighting, the theme remembered, every new key remappable."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from textual.pilot import Pilot
from textual.widgets import Input, Label, OptionList
from textual.widgets.text_area import Selection
from ui_support import AppFactory, make_config

from app.storage.config import Config, KeysSection, load_config
from app.storage.keys import KEYS
from ui.bindings import keymap
from ui.find_bar import FindBar
from ui.requests import draft_at_cursor
from ui.screens.dialogs import ConfirmScreen, PathScreen, RecoveryScreen
from ui.screens.files import OpenFileScreen, UnsavedScreen
from ui.status import TextCounts

from .test_drafts import wait_until

TEXT = "The cat sat on the mat.\nA cat ran off.\n\nCAT food is gone."
NEW_KEYS = (
    "doc_start",
    "doc_end",
    "select_to_start",
    "select_to_end",
    "find",
    "find_next",
    "find_previous",
    "replace",
    "open",
    "save_as",
)


def count_label(bar: FindBar) -> str:
    return str(bar.query_one("#find-count", Label).render())


async def test_ctrl_end_and_ctrl_home_move_to_the_document_ends(
    make_app: AppFactory, tiny_cacheable_path: Path
) -> None:
    app = make_app(config=make_config(tiny_cacheable_path, autocomplete=False))
    async with app.run_test(size=(80, 24)) as pilot:
        app.editor.load_text(TEXT)
        app.editor.move_cursor((1, 3))
        await pilot.press("ctrl+end")
        assert app.editor.cursor_location == app.editor.document.end == (3, 17)
        await pilot.press("ctrl+home")
        assert app.editor.cursor_location == (0, 0)
        await pilot.press("ctrl+shift+end")
        assert app.editor.selected_text == TEXT
        await pilot.press("ctrl+end", "ctrl+shift+home")
        assert app.editor.selected_text == TEXT and app.editor.cursor_location == (0, 0)
        # A draft asked for after ctrl+end lands at the end, not at the start.
        await pilot.press("ctrl+end")
        app.start_draft(draft_at_cursor(app.editor, "one more line", 48), "Draft")
        assert await wait_until(pilot, lambda: app.draft is not None and app.draft.done is not None)
        assert app.draft is not None and app.draft.done is not None
        drafted = app.draft.done.text
        await pilot.press("ctrl+y")
        assert app.editor.text == TEXT + drafted


async def test_find_selects_each_match_and_wraps(make_app: AppFactory) -> None:
    app = make_app(config=make_config(autocomplete=False))
    async with app.run_test(size=(80, 24)) as pilot:
        app.editor.load_text(TEXT)
        await pilot.press("ctrl+f")
        bar = app.find_bar
        assert bar.is_open and bar.display and app.focused is bar.query_input
        await pilot.press(*"cat")
        assert app.editor.selection == ((0, 4), (0, 7)) and count_label(bar) == "match 1 of 3"
        # Every match highlighted (case-insensitive), not only the selected one.
        assert app.editor._matches == {0: [(4, 7)], 1: [(2, 5)], 3: [(0, 3)]}
        assert any(span.start == 2 and span.end == 5 for span in app.editor.get_line(1).spans)
        await pilot.press("enter")
        assert app.editor.selection == ((1, 2), (1, 5)) and count_label(bar) == "match 2 of 3"
        await pilot.press("f3")
        assert app.editor.selected_text == "CAT" and count_label(bar) == "match 3 of 3"
        await pilot.press("f3")
        assert app.editor.selection == ((0, 4), (0, 7))
        assert count_label(bar) == "match 1 of 3 · wrapped to the start"
        await pilot.press("shift+f3")
        assert app.editor.selected_text == "CAT" and count_label(bar) == "match 3 of 3 · wrapped to the end"
        await pilot.press("shift+f3")
        assert app.editor.selection == ((1, 2), (1, 5))
        await pilot.press("escape")
        assert not bar.is_open and not bar.display and app.focused is app.editor
        assert app.editor._matches == {}
        # The selection opens the bar with it as the query.
        app.editor.selection = Selection((0, 19), (0, 22))
        await pilot.press("ctrl+f")
        assert bar.query_input.value == "mat" and count_label(bar) == "match 1 of 1"
        bar.query_input.value = "dog"
        await pilot.pause()
        assert count_label(bar) == "no matches"


async def test_replace_and_replace_all_are_one_undo_step_each(make_app: AppFactory) -> None:
    app = make_app(config=make_config(autocomplete=False))
    async with app.run_test(size=(80, 24)) as pilot:
        app.editor.load_text(TEXT)
        await pilot.press("ctrl+h")
        bar = app.find_bar
        assert bar.is_open and bar.query_one("#replace-row").display
        await pilot.press(*"cat")
        bar.replacement_input.focus()
        await pilot.press(*"dog", "enter")
        assert app.editor.text == TEXT.replace("cat", "dog", 1)
        assert app.editor.selection == ((1, 2), (1, 5)) and count_label(bar) == "match 1 of 2"
        app.editor.undo()
        assert app.editor.text == TEXT
        await pilot.click("#replace-all")
        assert app.editor.text == "The dog sat on the mat.\nA dog ran off.\n\ndog food is gone."
        assert "replaced 3" in count_label(bar)
        app.editor.undo()
        assert app.editor.text == TEXT, "one undo takes every replacement back"
        await pilot.press("escape")
        # ctrl+backslash is the replace key every terminal can send (most send ctrl+h as backspace).
        await pilot.press("ctrl+backslash")
        assert bar.is_open and app.focused is bar.replacement_input


async def test_open_a_file_by_path_and_from_the_recent_list(make_app: AppFactory, tmp_path: Path) -> None:
    first, second = tmp_path / "first.txt", tmp_path / "second.md"
    first.write_text("first file\n")
    second.write_text("# Second\n\nsome *notes*\n")
    app = make_app(config=make_config(autocomplete=False))
    async with app.run_test(size=(80, 24)) as pilot:
        for path in (first, second):
            await pilot.press("ctrl+o")
            assert await wait_until(pilot, lambda: isinstance(app.screen, OpenFileScreen))
            app.screen.query_one("#open-path", Input).value = str(path)
            await pilot.press("enter")
            assert await wait_until(pilot, lambda path=path: app.files.document == path)  # type: ignore[misc]
            assert app.editor.text == path.read_text() and app.sub_title == str(path)
        assert app.editor.language == "markdown"
        assert app.files.recent_files.load() == [second, first]
        await pilot.press("ctrl+o")
        assert await wait_until(pilot, lambda: isinstance(app.screen, OpenFileScreen))
        recent = app.screen.query_one("#recent-files", OptionList)
        assert [str(recent.get_option_at_index(i).prompt) for i in range(recent.option_count)] == [
            str(second),
            str(first),
        ]
        recent.focus()
        recent.highlighted = 1
        await pilot.press("enter")
        assert await wait_until(pilot, lambda: app.files.document == first)
        assert app.editor.text == "first file\n" and app.editor.language is None
        assert await wait_until(pilot, lambda: app.files.recent_files.load() == [first, second])


async def test_unsaved_changes_are_kept_or_saved_before_another_file_opens(
    make_app: AppFactory, tmp_path: Path
) -> None:
    letter, other = tmp_path / "letter.txt", tmp_path / "other.txt"
    letter.write_text("Dear Sam,\n")
    other.write_text("other text")
    app = make_app(config=make_config(autocomplete=False), document=letter)

    async def open_other(pilot: Pilot, choice: str) -> None:
        await pilot.press("ctrl+o")
        assert await wait_until(pilot, lambda: isinstance(app.screen, OpenFileScreen))
        app.screen.query_one("#open-path", Input).value = str(other)
        await pilot.press("enter")
        assert await wait_until(pilot, lambda: isinstance(app.screen, UnsavedScreen))
        await pilot.click(f"#{choice}")

    async with app.run_test(size=(80, 24)) as app_pilot:
        app.editor.move_cursor(app.editor.document.end)
        await app_pilot.press(*"unsaved words")
        await open_other(app_pilot, "cancel")
        await app_pilot.pause()
        assert app.files.document == letter and app.editor.text == "Dear Sam,\nunsaved words"
        await open_other(app_pilot, "keep")
        assert await wait_until(app_pilot, lambda: app.files.document == other)
        assert letter.read_text() == "Dear Sam,\n", "kept: the file is untouched"
        recovery = app.files.store.recovery(letter)
        assert recovery is not None and recovery.text == "Dear Sam,\nunsaved words"
        # Opening it again offers the kept text back.
        await app_pilot.press("ctrl+o")
        assert await wait_until(app_pilot, lambda: isinstance(app.screen, OpenFileScreen))
        app.screen.query_one("#recent-files", OptionList).focus()
        app.screen.query_one("#recent-files", OptionList).highlighted = 1
        await app_pilot.press("enter")
        assert await wait_until(app_pilot, lambda: isinstance(app.screen, RecoveryScreen))
        await app_pilot.click("#recover")
        await app_pilot.pause()
        assert app.files.document == letter and app.editor.text == "Dear Sam,\nunsaved words"
        await open_other(app_pilot, "save")
        assert await wait_until(app_pilot, lambda: app.files.document == other)
        assert letter.read_text() == "Dear Sam,\nunsaved words"


async def test_save_as_writes_the_new_file_and_renames_the_document(make_app: AppFactory, tmp_path: Path) -> None:
    letter, copy = tmp_path / "letter.txt", tmp_path / "copy.md"
    letter.write_text("Dear Sam,\n")
    app = make_app(config=make_config(autocomplete=False), document=letter)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("f12")
        assert isinstance(app.screen, PathScreen)
        field = app.screen.query_one("#path", Input)
        assert field.value == str(letter)
        field.value = str(copy)
        await pilot.press("enter")
        await pilot.pause()
        assert copy.read_text() == "Dear Sam,\n" and app.files.document == copy
        assert app.sub_title == str(copy) and app.editor.language == "markdown"
        assert await wait_until(pilot, lambda: app.files.recent_files.load()[:1] == [copy])
        # ctrl+shift+s is the same action, for the terminals that can send it.
        await pilot.press("ctrl+shift+s")
        assert isinstance(app.screen, PathScreen)


async def test_the_status_bar_counts_the_document_and_the_selection(make_app: AppFactory) -> None:
    app = make_app(config=make_config(autocomplete=False))
    async with app.run_test(size=(100, 24)) as pilot:
        app.editor.load_text("one two three\nfour")
        await pilot.pause()
        assert app.status.info.counts == TextCounts(4, 17, 2)
        assert "4 words · 17 chars · 2 lines" in str(app.status.render())
        await pilot.press("ctrl+end", *" five")
        assert app.status.info.counts == TextCounts(5, 22, 2)
        app.editor.selection = Selection((0, 4), (0, 13))
        await pilot.pause()
        assert app.status.info.selection == TextCounts(2, 9, 1)
        assert "sel 2 words · 9 chars │" in str(app.status.render())
        app.editor.selection = Selection((0, 8), (1, 2))
        await pilot.pause()
        assert "sel 2 words · 7 chars · 2 lines │" in str(app.status.render())
        await pilot.press("right")
        assert app.status.info.selection is None and "sel" not in str(app.status.render())


async def test_a_markdown_file_is_highlighted_and_a_text_file_is_not(make_app: AppFactory, tmp_path: Path) -> None:
    notes, plain = tmp_path / "notes.md", tmp_path / "plain.txt"
    notes.write_text("# Title\n\nSome *emphasis*.\n")
    plain.write_text("# not a title\n")
    for path, language in ((notes, "markdown"), (plain, None)):
        app = make_app(config=make_config(autocomplete=False), document=path)
        async with app.run_test(size=(80, 24)):
            assert app.editor.language == language
            assert app.editor.text == path.read_text()


def with_theme(config: Config, theme: str) -> Config:
    return dataclasses.replace(config, ui=dataclasses.replace(config.ui, theme=theme))


async def test_the_theme_is_remembered_in_config_toml(make_app: AppFactory, sharpen_home: Path) -> None:
    config_file = sharpen_home / "config" / "config.toml"
    app = make_app(config=make_config(autocomplete=False))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert app.theme == "textual-dark" and not config_file.exists(), "nothing written at start"
        app.theme = "nord"  # what the command palette's "Change theme" does
        assert await wait_until(pilot, lambda: config_file.exists() and "nord" in config_file.read_text())
    assert load_config(config_file).ui.theme == "nord"
    again = make_app(config=with_theme(make_config(autocomplete=False), load_config(config_file).ui.theme))
    async with again.run_test(size=(80, 24)):
        assert again.theme == "nord"
    unknown = make_app(config=with_theme(make_config(autocomplete=False), "no-such-theme"))
    async with unknown.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert unknown.theme == "textual-dark"
        assert any("no-such-theme" in n.message and "not one of" in n.message for n in unknown._notifications)


async def test_every_new_key_is_remappable(make_app: AppFactory, tmp_path: Path) -> None:
    declared = {key.name for key in KEYS}
    assert set(NEW_KEYS) <= declared
    remapped = {name: f"f{13 + i}" for i, name in enumerate(NEW_KEYS)}
    keys = dataclasses.replace(KeysSection(), **remapped)
    for key in KEYS:
        if key.name in remapped:
            assert all(keymap(keys)[f"sharpen.{use.action}"] == remapped[key.name] for use in key.uses)
    config = dataclasses.replace(make_config(autocomplete=False), keys=keys)
    app = make_app(config=config)
    async with app.run_test(size=(80, 24)) as pilot:
        app.editor.load_text(TEXT)
        await pilot.press("ctrl+end")
        assert app.editor.cursor_location == (0, 0), "ctrl+end is no longer bound"
        await pilot.press(remapped["doc_end"])
        assert app.editor.cursor_location == (3, 17)
        await pilot.press(remapped["select_to_start"])
        assert app.editor.selected_text == TEXT
        await pilot.press(remapped["doc_start"])
        assert app.editor.cursor_location == (0, 0)
        await pilot.press(remapped["select_to_end"])
        assert app.editor.selected_text == TEXT
        await pilot.press("ctrl+home", "ctrl+f")
        assert not app.find_bar.is_open
        await pilot.press(remapped["find"], *"cat")
        assert app.find_bar.is_open and app.editor.selection == ((0, 4), (0, 7))
        await pilot.press(remapped["find_next"])
        assert app.editor.selection == ((1, 2), (1, 5))
        await pilot.press(remapped["find_previous"])
        assert app.editor.selection == ((0, 4), (0, 7))
        await pilot.press("escape", remapped["replace"])
        assert app.find_bar.has_class("replacing")
        await pilot.press("escape", remapped["save_as"])
        assert isinstance(app.screen, PathScreen)
        await pilot.press("escape", remapped["open"])
        assert await wait_until(pilot, lambda: isinstance(app.screen, OpenFileScreen))


async def save_as(pilot: Pilot, target: Path) -> None:
    await pilot.press("f12")
    screen = pilot.app.screen
    assert isinstance(screen, PathScreen)
    screen.query_one("#path", Input).value = str(target)
    await pilot.press("enter")
    await pilot.pause()


async def test_save_as_keeps_the_cursor_where_it_was(make_app: AppFactory, tmp_path: Path) -> None:
    app = make_app(config=make_config(autocomplete=False), document=tmp_path / "letter.txt")
    async with app.run_test(size=(80, 24)) as pilot:
        app.editor.load_text(TEXT)
        app.editor.selection = Selection((1, 2), (1, 5))
        await save_as(pilot, tmp_path / "letter.md")  # Markdown now: the editor's language changes
        assert app.editor.language == "markdown" and app.editor.selection == Selection((1, 2), (1, 5))


async def test_saving_over_another_file_asks_first(make_app: AppFactory, tmp_path: Path) -> None:
    other = tmp_path / "other.txt"
    other.write_text("keep me\n")
    app = make_app(config=make_config(autocomplete=False), document=tmp_path / "letter.txt")
    async with app.run_test(size=(80, 24)) as pilot:
        app.editor.load_text(TEXT)
        await save_as(pilot, other)
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("escape")
        assert other.read_text() == "keep me\n" and app.files.document == tmp_path / "letter.txt"
        await save_as(pilot, other)
        await pilot.click("#yes")
        await pilot.pause()
        assert other.read_text() == TEXT and app.files.document == other


async def test_a_failed_save_keeps_the_text_in_the_autosave(make_app: AppFactory, tmp_path: Path) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    app = make_app(config=make_config(autocomplete=False))
    async with app.run_test(size=(80, 24)) as pilot:
        app.editor.load_text(TEXT)
        app.files.autosave()  # the autosave is up to date: the failed save must not drop it
        await save_as(pilot, blocked / "letter.txt")  # a folder that is a file: the save fails
        assert app.files.document is None
        recovery = app.files.store.recovery(None)
        assert recovery is not None and recovery.text == TEXT


async def test_a_new_text_drops_the_old_texts_suggestion(make_app: AppFactory) -> None:
    app = make_app(config=make_config(autocomplete=False))
    async with app.run_test(size=(80, 24)):
        app.editor.load_text("Dear Sam, thanks")
        app.editor.suggestion = " for the notes"
        app.editor.load_text("Another file")
        assert app.editor.suggestion == "" and app.editor.text == "Another file"


async def test_an_unexpected_error_fails_the_draft_instead_of_leaving_it_refining(
    make_app: AppFactory, tiny_cacheable_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = make_app(config=make_config(draft_model=tiny_cacheable_path, autocomplete=False))

    def broken(*_args: object, **_kwargs: object) -> None:
        raise PermissionError(13, "Permission denied", "model.gguf")

    monkeypatch.setattr(app.service, "draft", broken)
    async with app.run_test(size=(80, 24)) as pilot:
        app.editor.load_text(TEXT)
        app.start_draft(draft_at_cursor(app.editor, "more", 48), "Draft")
        assert await wait_until(pilot, lambda: app.draft is not None and app.draft.state == "failed")
        assert not app.panel.refining
