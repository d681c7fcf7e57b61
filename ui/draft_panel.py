"""The panel under the editor where a draft refines, pass by pass, until it is inserted or dropped."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.widgets import Label

from ui.refinement import RefinementView


class DraftPanel(Vertical):
    DEFAULT_CSS = """
    DraftPanel { height: 40%; min-height: 6; border: round $accent; display: none; overflow: hidden; }
    DraftPanel > VerticalScroll { height: 1fr; }
    DraftPanel.open { display: block; }
    DraftPanel #draft-hint { color: $text-muted; }
    """

    def compose(self) -> ComposeResult:
        yield Label("", id="draft-title")
        with VerticalScroll():
            yield RefinementView(id="draft-view")
        yield Label("", id="draft-hint")

    @property
    def view(self) -> RefinementView:
        return self.query_one("#draft-view", RefinementView)

    def open(self, title: str) -> None:
        self.view.current = None
        self.view.streamed = ""
        self.query_one("#draft-title", Label).update(title)
        self.hint("refining… esc cancels")
        self.add_class("open")

    def hint(self, text: str) -> None:
        self.query_one("#draft-hint", Label).update(text)

    def close(self) -> None:
        self.remove_class("open")
