"""Drafts that know the document: Ctrl+D sends the text around the cursor, Ctrl+R takes an instruction,
candidates flip and insert as one undo step, and the draft history survives a restart and a corrupt file."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import Input, Label, OptionList
from ui_support import AppFactory, make_config

from app.domain.draft_request import DraftRequest
from app.storage.draft_history import DraftHistory
from ui.requests import draft_at_cursor, rewrite_of_selection
from ui.screens.dialogs import DraftPromptScreen, RewriteScreen
from ui.screens.history import HistoryScreen

from .test_drafts import wait_until

DOCUMENT_BEFORE = "Hi Sam,\n\nThanks for the invitation to Friday's planning meeting.\n\n"
DOCUMENT_AFTER = "\n\nBest,\nAna\n"


async def test_the_request_carries_the_text_around_the_cursor(make_app: AppFactory) -> None:
    app = make_app(config=make_config(None, autocomplete=False))
    async with app.run_test(size=(80, 24)):
        app.editor.load_text(DOCUMENT_BEFORE + DOCUMENT_AFTER)
        app.editor.move_cursor((4, 0))  # the empty line after the first paragraph
        request = draft_at_cursor(app.editor, "decline politely", 64)
        assert request == DraftRequest(
            "draft", "decline politely", before=DOCUMENT_BEFORE, after=DOCUMENT_AFTER, tokens=64
        )
        app.editor.move_cursor((2, 0))
        app.editor.move_cursor((2, 9), select=True)
        rewrite = rewrite_of_selection(app.editor, "more formal", 12)
        assert (rewrite.kind, rewrite.selection, rewrite.instruction) == ("infill", "Thanks fo", "more formal")
        assert rewrite.before == "Hi Sam,\n\n" and rewrite.after == DOCUMENT_BEFORE[18:] + DOCUMENT_AFTER


async def test_ctrl_d_in_a_document_sends_that_document(make_app: AppFactory, tiny_cacheable_path: Path) -> None:
    app = make_app(config=make_config(tiny_cacheable_path, autocomplete=False))
    async with app.run_test(size=(80, 24)) as pilot:
        app.editor.load_text(DOCUMENT_BEFORE + DOCUMENT_AFTER)
        app.editor.move_cursor((4, 0))
        await pilot.press("ctrl+d")
        assert isinstance(app.screen, DraftPromptScreen)
        await pilot.press(*"decline politely")
        await pilot.press("enter")
        assert await wait_until(pilot, lambda: app.draft is not None and app.draft.done is not None)
        assert app.draft is not None and app.draft.reply is not None and app.draft.request is not None
        assert (app.draft.request.before, app.draft.request.after) == (DOCUMENT_BEFORE, DOCUMENT_AFTER)
        context = app.draft.reply.context
        assert context is not None and context.complete
        assert (context.before, context.after) == (DOCUMENT_BEFORE, DOCUMENT_AFTER)
        assert "tokens of the document around the cursor" in app.status.info.reason


async def test_a_document_too_long_for_the_model_is_cut_and_said(
    make_app: AppFactory, tiny_cacheable_path: Path
) -> None:
    app = make_app(config=make_config(tiny_cacheable_path, autocomplete=False))
    long_document = "".join(f"Paragraph {n}: the budget review moves to Thursday at ten.\n\n" for n in range(400))
    async with app.run_test(size=(80, 24)) as pilot:
        app.editor.load_text(long_document)
        app.editor.move_cursor(app.editor.document.end)
        app.start_draft(draft_at_cursor(app.editor, "a closing line", 48), "Draft")
        assert await wait_until(pilot, lambda: app.draft is not None and app.draft.done is not None)
        assert app.draft is not None and app.draft.reply is not None
        context = app.draft.reply.context
        assert context is not None and context.left_out_before > 0
        # The paragraphs nearest the cursor, whole.
        assert long_document.endswith(context.before) and context.before.startswith("Paragraph ")
        assert "left out" in str(app.panel.query_one("#draft-hint", Label).render())
        # The notice is a message of its own: it may arrive just after the draft is shown.
        assert await wait_until(pilot, lambda: any("were left out" in n.message for n in app._notifications))


async def test_a_rewrite_takes_an_instruction_and_a_length_that_follows_it(
    make_app: AppFactory, tiny_cacheable_path: Path
) -> None:
    app = make_app(config=make_config(tiny_cacheable_path, autocomplete=False))
    before, selected, after = "Dear Sam, ", "thank you for the flowers and the card you sent last week " * 3, "Ana"
    async with app.run_test(size=(80, 24)) as pilot:
        app.editor.load_text(before + selected + after)
        app.editor.move_cursor((0, len(before)))
        app.editor.move_cursor((0, len(before) + len(selected)), select=True)
        await pilot.press("ctrl+r")
        assert isinstance(app.screen, RewriteScreen)
        length = app.screen.query_one("#draft-tokens", Input)
        full = int(length.value)
        await pilot.press(*"shorter")
        assert int(length.value) < full  # "shorter" asks for less than the selection's length
        await pilot.press("enter")
        assert await wait_until(pilot, lambda: app.draft is not None and app.draft.done is not None)
        assert app.draft is not None and app.draft.request is not None and app.draft.reply is not None
        assert app.draft.request.instruction == "shorter" and app.draft.reply.tokens < full
        replacement = app.draft.done.text if app.draft.done else ""
        await pilot.press("ctrl+y")
        # Both sides byte for byte; the selection replaced by the draft.
        assert app.editor.text == before + replacement + after


async def test_candidates_flip_and_insert_as_one_undo_step(make_app: AppFactory, tiny_cacheable_path: Path) -> None:
    app = make_app(config=make_config(tiny_cacheable_path, autocomplete=False))
    async with app.run_test(size=(80, 24)) as pilot:
        app.editor.load_text("Hi team,\n")
        app.editor.move_cursor(app.editor.document.end)
        await pilot.press(*"Quick note: ")
        typed = app.editor.text
        app.start_draft(draft_at_cursor(app.editor, "a note about Friday", 48), "Draft")
        assert await wait_until(pilot, lambda: app.draft is not None and app.draft.done is not None)
        first = app.draft
        await pilot.press("ctrl+n")
        assert await wait_until(
            pilot, lambda: app.draft is not first and app.draft is not None and bool(app.draft.done)
        )
        second = app.draft
        assert second is not None and second.done is not None and first is not None and first.done is not None
        assert len(app.panel.candidates) == 2 and second.done.text != first.done.text
        assert "candidate 2 of 2" in str(app.panel.query_one("#draft-title").render())
        await pilot.press("ctrl+pageup")
        assert app.draft is first and app.panel.view.current is first.passes[-1]
        await pilot.press("ctrl+pageup")  # no candidate before the first: the key does nothing
        assert app.draft is first
        await pilot.press("ctrl+pagedown")
        assert app.draft is second
        await pilot.press("ctrl+y")
        assert app.editor.text == typed + second.done.text
        await pilot.press("ctrl+z")
        assert app.editor.text == typed, "one undo takes the whole draft back out, and only it"


async def test_the_history_survives_a_restart_and_replays(
    make_app: AppFactory, tiny_cacheable_path: Path, tmp_path: Path
) -> None:
    document = tmp_path / "letter.txt"
    document.write_text("Dear Sam,\n\n")
    config = make_config(tiny_cacheable_path, autocomplete=False)
    app = make_app(config=config, document=document)
    async with app.run_test(size=(80, 24)) as pilot:
        app.editor.move_cursor(app.editor.document.end)
        app.start_draft(draft_at_cursor(app.editor, "a thank-you note", 48), "Draft")
        assert await wait_until(pilot, lambda: app.draft is not None and app.draft.done is not None)
        assert app.draft is not None and app.draft.done is not None
        text = app.draft.done.text
        assert await wait_until(pilot, lambda: len(app.history.drafts(document)) == 1)
    again = make_app(config=config, document=document)
    async with again.run_test(size=(80, 24)) as pilot:
        await pilot.press("f4")
        assert await wait_until(pilot, lambda: isinstance(again.screen, HistoryScreen))
        options = again.screen.query_one("#history", OptionList)
        assert options.option_count == 1 and "a thank-you note" in str(options.get_option_at_index(0).prompt)
        await pilot.press("enter")
        assert await wait_until(pilot, lambda: again.draft is not None)
        assert again.draft is not None and again.draft.done is not None and again.draft.done.text == text
        await pilot.press("f5")
        assert type(again.screen).__name__ == "PlaybackScreen"
        assert again.panel.last_trace is not None and len(again.panel.last_trace.passes) == 12
        await pilot.press("escape")
        again.editor.move_cursor(again.editor.document.end)
        await pilot.press("ctrl+y")
        assert again.editor.text == "Dear Sam,\n\n" + text


async def test_a_corrupt_history_is_set_aside_with_a_warning(make_app: AppFactory, sharpen_home: Path) -> None:
    state = sharpen_home / "state"
    state.mkdir(parents=True, exist_ok=True)
    (state / "drafts.sqlite3").write_bytes(b"this is not a database" * 100)
    app = make_app(config=make_config(None, autocomplete=False))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("f4")
        assert await wait_until(pilot, lambda: isinstance(app.screen, HistoryScreen))
        assert await wait_until(pilot, lambda: any("could not be read" in n.message for n in app._notifications))
    aside = list(state.glob("drafts.sqlite3.corrupt-*"))
    assert len(aside) == 1 and aside[0].read_bytes().startswith(b"this is not a database")
    assert DraftHistory(state / "drafts.sqlite3").drafts(None) == []


async def test_a_length_the_user_typed_stays_put(make_app: AppFactory) -> None:
    app = make_app(config=make_config(None, autocomplete=False))
    async with app.run_test(size=(80, 24)) as pilot:
        app.editor.load_text("Dear Sam, thank you for the flowers and the card.")
        app.editor.move_cursor((0, 10))
        app.editor.move_cursor((0, 49), select=True)
        await pilot.press("ctrl+r")
        assert isinstance(app.screen, RewriteScreen)
        length = app.screen.query_one("#draft-tokens", Input)
        length.focus()
        length.value = ""
        await pilot.press(*"40")
        app.screen.query_one("#rewrite-instruction", Input).focus()
        await pilot.press(*"much shorter")
        assert length.value == "40"
