"""F1: every key Sharpen binds, as configured."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable, Label


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,f1,q", "close", "Close")]

    def __init__(self, keys: list[tuple[str, str, str]]) -> None:
        """keys: (config key under [keys], keys, what it does)."""
        super().__init__()
        self.keys = keys

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog wide"):
            yield Label("Keys — remap one with `sharpen config set keys.NAME KEYS`", classes="title", markup=False)
            table: DataTable[str] = DataTable(cursor_type="none", zebra_stripes=True)
            table.add_columns("keys", "does", "NAME")
            for name, keys, description in self.keys:
                table.add_row(keys, description, name)
            yield table

    def action_close(self) -> None:
        self.dismiss(None)
