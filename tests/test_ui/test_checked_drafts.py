"""An AR draft checked against what its instruction asks, in the editor: the panel ends on the kept draft, and
says what it still misses. The real embedded AR model."""

from __future__ import annotations

import dataclasses

from textual.widgets import Input
from ui_support import AppFactory, make_config

from app.storage.config import ChatSection
from ui.screens.dialogs import DraftPromptScreen

from .test_drafts import wait_until

ASKED = "Tell Wilhelmina the parcel ZX-40913 comes on Wednesday at 4:15pm and costs 37 euros."


async def test_the_panel_shows_the_kept_draft_and_what_it_still_misses(make_app: AppFactory) -> None:
    config = make_config(autocomplete=False)
    app = make_app(config=dataclasses.replace(config, chat=ChatSection(fact_tries=3)))
    async with app.run_test(size=(100, 30)) as pilot:
        app.editor.load_text("Hi Wilhelmina,\n\nThanks for your message about the delivery.\n\n")
        app.editor.move_cursor(app.editor.document.end)
        await pilot.press("ctrl+d")
        dialog = app.screen
        assert isinstance(dialog, DraftPromptScreen)
        dialog.query_one("#draft-prompt", Input).value = ASKED
        dialog.query_one("#draft-tokens", Input).value = "40"
        await pilot.press("enter")
        assert await wait_until(pilot, lambda: app.draft is not None and app.draft.state == "ready", 60)
        run = app.draft
        assert run is not None and run.reply is not None and run.done is not None and run.reply.engine == "ar"
        checked = run.reply.checked
        assert checked is not None and 1 <= checked.tries <= 3
        assert app.panel.view.streamed == run.done.text, "the panel ends on the kept draft"
        assert app.panel.finished_text() == (run, run.done.text)
        if checked.note():
            assert await wait_until(pilot, lambda: any(checked.note() in n.message for n in app._notifications))
