"""Small modal dialogs: a draft request, a rewrite (each with its length and the engine to write it), a file path,
and recovering an autosave."""

from __future__ import annotations

from dataclasses import dataclass

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Select

from app.domain.context import suggested_rewrite_tokens
from router.request import EngineName

MAX_TOKENS = 4096
AUTO = "auto"
# The engine field's choices: auto asks the router (whose reason the draft panel shows).
ENGINE_CHOICES: tuple[tuple[str, str], ...] = (("auto (the router)", AUTO), ("AR", "ar"), ("diffusion", "diffusion"))


@dataclass(frozen=True)
class DraftAsk:
    prompt: str
    tokens: int
    # The engine the writer chose; None: the router chooses.
    engine: EngineName | None = None


def length_and_engine(tokens: str, engine: EngineName | None) -> ComposeResult:
    """The length field and the engine field, side by side."""
    with Horizontal(classes="fields"):
        with Vertical(classes="field"):
            yield Label("Length in tokens")
            yield Input(tokens, id="draft-tokens", type="integer")
        with Vertical(classes="field beside"):
            yield Label("Engine")
            yield Select(ENGINE_CHOICES, value=engine or AUTO, allow_blank=False, id="draft-engine")


def chosen_engine(dialog: ModalScreen[DraftAsk | None]) -> EngineName | None:
    """The engine field's choice; None for auto."""
    value = dialog.query_one("#draft-engine", Select).value
    return "ar" if value == "ar" else "diffusion" if value == "diffusion" else None


class DraftPromptScreen(ModalScreen[DraftAsk | None]):
    """Ask what to draft, how long, and with which engine (auto: the router's choice)."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, default_tokens: int, engine: EngineName | None = None) -> None:
        super().__init__()
        self.default_tokens = default_tokens
        self.engine = engine

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label("Draft at the cursor: what should it say?")
            yield Label("It is written to fit the text around the cursor.", classes="hint")
            yield Input(placeholder="e.g. a reply declining politely; empty: what belongs here", id="draft-prompt")
            yield from length_and_engine(str(self.default_tokens), self.engine)
            yield Label("", id="draft-error", classes="error")

    @on(Select.Changed, "#draft-engine")
    def _back_to_the_prompt(self) -> None:
        """Enter in a text field asks: after choosing the engine, the writer is back where it works."""
        self.query_one("#draft-prompt", Input).focus()

    def on_input_submitted(self, _event: Input.Submitted) -> None:
        prompt = self.query_one("#draft-prompt", Input).value.strip()
        tokens = _tokens(self.query_one("#draft-tokens", Input), self.query_one("#draft-error", Label))
        if tokens is not None:
            self.dismiss(DraftAsk(prompt, tokens, chosen_engine(self)))

    def action_cancel(self) -> None:
        self.dismiss(None)


def _tokens(field: Input, error: Label) -> int | None:
    text = field.value.strip()
    if not text.isdigit() or not 1 <= int(text) <= MAX_TOKENS:
        error.update(f"The length must be a whole number from 1 to {MAX_TOKENS}.")
        return None
    return int(text)


class RewriteScreen(ModalScreen[DraftAsk | None]):
    """Ask how to rewrite the selection (optional), how long the new text should be and with which engine: the
    length follows the instruction ("shorter" asks for less) until the user sets it."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, selection_tokens: int, engine: EngineName | None = None) -> None:
        super().__init__()
        self.selection_tokens = selection_tokens
        self.engine = engine
        self._suggested = str(suggested_rewrite_tokens("", selection_tokens))
        self._length_chosen = False

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label("Rewrite the selection: how?")
            yield Label("Empty: new text for it from the text on both sides.", classes="hint")
            yield Input(placeholder="e.g. shorter, more formal, as a bulleted list", id="rewrite-instruction")
            yield from length_and_engine(self._suggested, self.engine)
            yield Label("", id="draft-error", classes="error")

    @on(Select.Changed, "#draft-engine")
    def _back_to_the_instruction(self) -> None:
        self.query_one("#rewrite-instruction", Input).focus()

    @on(Input.Changed, "#rewrite-instruction")
    def _follow_instruction(self, event: Input.Changed) -> None:
        if not self._length_chosen:
            self._suggested = str(suggested_rewrite_tokens(event.value, self.selection_tokens))
            length = self.query_one("#draft-tokens", Input)
            with length.prevent(Input.Changed):
                length.value = self._suggested

    @on(Input.Changed, "#draft-tokens")
    def _length_set(self, event: Input.Changed) -> None:
        if event.value != self._suggested:  # typed by the user, not the suggestion
            self._length_chosen = True

    def on_input_submitted(self, _event: Input.Submitted) -> None:
        instruction = self.query_one("#rewrite-instruction", Input).value.strip()
        tokens = _tokens(self.query_one("#draft-tokens", Input), self.query_one("#draft-error", Label))
        if tokens is not None:
            self.dismiss(DraftAsk(instruction, tokens, chosen_engine(self)))

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


class ConfirmScreen(ModalScreen[bool]):
    """A yes-or-no question; Esc is no."""

    BINDINGS = [Binding("escape", "no", "Cancel")]

    def __init__(self, question: str, yes: str) -> None:
        super().__init__()
        self.question = question
        self.yes = yes

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(self.question, markup=False)
            with Horizontal(classes="buttons"):
                yield Button(self.yes, id="yes", variant="warning")
                yield Button("Cancel", id="no")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_no(self) -> None:
        self.dismiss(False)
