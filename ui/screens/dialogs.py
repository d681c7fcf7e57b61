"""Small modal dialogs: a draft request, a file path, and recovering an autosave."""

from __future__ import annotations

from dataclasses import dataclass

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label


@dataclass(frozen=True)
class DraftAsk:
    prompt: str
    tokens: int


class DraftPromptScreen(ModalScreen[DraftAsk | None]):
    """Ask what to draft and how long."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, default_tokens: int) -> None:
        super().__init__()
        self.default_tokens = default_tokens

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label("Draft at the cursor: what should it say?")
            yield Input(placeholder="e.g. a short email declining the meeting politely", id="draft-prompt")
            yield Label("Length in tokens")
            yield Input(str(self.default_tokens), id="draft-tokens", type="integer")
            yield Label("", id="draft-error", classes="error")

    def on_input_submitted(self, _event: Input.Submitted) -> None:
        prompt = self.query_one("#draft-prompt", Input).value.strip()
        tokens_text = self.query_one("#draft-tokens", Input).value.strip()
        error = self.query_one("#draft-error", Label)
        if not prompt:
            error.update("Write what the draft should say.")
            return
        if not tokens_text.isdigit() or not 1 <= int(tokens_text) <= 4096:
            error.update("The length must be a whole number from 1 to 4096.")
            return
        self.dismiss(DraftAsk(prompt, int(tokens_text)))

    def action_cancel(self) -> None:
        self.dismiss(None)


class PathScreen(ModalScreen[str | None]):
    """Ask for a file path (save as, load a trace)."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, title: str, value: str = "") -> None:
        super().__init__()
        self.title_text = title
        self.value = value

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(self.title_text)
            yield Input(self.value, id="path")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip() or None)

    def action_cancel(self) -> None:
        self.dismiss(None)


class RecoveryScreen(ModalScreen[bool]):
    """An autosave is newer than the file: recover it or discard it."""

    def __init__(self, name: str, saved_at: str) -> None:
        super().__init__()
        self.name_text = name
        self.saved_at = saved_at

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(f"Unsaved changes to {self.name_text} were autosaved at {self.saved_at}.")
            yield Label("Recover them?")
            with Horizontal(classes="buttons"):
                yield Button("Recover", id="recover", variant="primary")
                yield Button("Discard", id="discard", variant="error")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "recover")
