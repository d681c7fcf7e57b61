"""The past drafts of this document, newest first: pick one to reopen it in the draft panel."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Label, OptionList
from textual.widgets.option_list import Option

from app.storage.draft_history import PastDraft


class HistoryScreen(ModalScreen[PastDraft | None]):
    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, drafts: list[PastDraft]) -> None:
        super().__init__()
        self.drafts = {str(past.id): past for past in drafts}

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            if not self.drafts:
                yield Label("No drafts of this document yet: Ctrl+D drafts one. Esc closes.")
                return
            yield Label("Past drafts of this document: enter reopens one.")
            yield Label("Then ctrl+enter inserts it and f5 replays its passes.", classes="hint")
            options = [Option(past.summary, id=key) for key, past in self.drafts.items()]
            yield OptionList(*options, id="history", markup=False)

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(self.drafts.get(event.option.id or ""))

    def action_cancel(self) -> None:
        self.dismiss(None)
