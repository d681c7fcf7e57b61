"""F2: the models Sharpen knows, which are present, which serves what; switch between them."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable, Label

from app.service import ModelStatus


class ModelsScreen(ModalScreen[tuple[str, str] | None]):
    """Dismisses with (role, model name) when the user picks a model for a role."""

    BINDINGS = [
        Binding("escape,f2", "close", "Close"),
        Binding("c", "use('complete')", "Use for completions"),
        Binding("d", "use('draft')", "Use for drafts"),
    ]

    def __init__(self, models: list[ModelStatus], draft_model: str) -> None:
        super().__init__()
        self.models = models
        self.draft_model = draft_model

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog wide"):
            yield Label("Models — c: use for completions · d: use for drafts · esc: close", classes="title")
            table: DataTable[str] = DataTable(cursor_type="row", id="models")
            table.add_columns("name", "role", "engine", "size", "serves")
            for model in self.models:
                size = f"{model.size_bytes / 1e6:.0f} MB" if model.present and model.size_bytes else "missing"
                table.add_row(
                    model.name, model.role, model.engine, size, ", ".join(model.in_use_for) or "—", key=model.name
                )
            yield table
            draft = self.draft_model or "none configured (drafts go to the AR model)"
            yield Label(f"Drafts: {draft}", id="draft-model")

    def action_use(self, role: str) -> None:
        table = self.query_one("#models", DataTable)
        if table.row_count:
            row_key, _ = table.coordinate_to_cell_key(table.cursor_coordinate)
            self.dismiss((role, str(row_key.value)))

    def action_close(self) -> None:
        self.dismiss(None)
