"""Opening a file: a path to type or one of the recent files (newest first); and what to do with unsaved changes
before another file replaces the document."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, OptionList
from textual.widgets.option_list import Option


class OpenFileScreen(ModalScreen[Path | None]):
    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, recent: list[Path]) -> None:
        super().__init__()
        self.recent = recent

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label("Open a file: type its path, or tab to a recent one.")
            yield Input(placeholder="path of the file (a new one starts empty)", id="open-path")
            if self.recent:
                yield Label("Recent files", classes="hint")
                options = [Option(str(path), id=str(index)) for index, path in enumerate(self.recent)]
                yield OptionList(*options, id="recent-files", markup=False)
            else:
                yield Label("No recent files yet.", classes="hint")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        path = event.value.strip()
        self.dismiss(Path(path).expanduser() if path else None)

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(self.recent[int(event.option.id or 0)])

    def action_cancel(self) -> None:
        self.dismiss(None)


UnsavedChoice = Literal["save", "keep"]


class UnsavedScreen(ModalScreen[UnsavedChoice | None]):
    """The document has unsaved changes and another file is to replace it: save them, keep them in the autosave
    (offered back when the file is opened again), or stay."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, name: str, other: str) -> None:
        super().__init__()
        self.name_text = name
        self.other = other

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(f"{self.name_text} has unsaved changes. Save them before opening {self.other}?", markup=False)
            yield Label("Keep: they stay in the autosave, offered back when you open it again.", classes="hint")
            with Horizontal(classes="buttons"):
                yield Button("Save", id="save", variant="primary")
                yield Button("Keep in autosave", id="keep")
                yield Button("Cancel", id="cancel")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        choices: dict[str | None, UnsavedChoice] = {"save": "save", "keep": "keep"}
        self.dismiss(choices.get(event.button.id))

    def action_cancel(self) -> None:
        self.dismiss(None)
