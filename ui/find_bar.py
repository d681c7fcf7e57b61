"""The find bar, docked under the editor: find (case-insensitive) with every match highlighted and the current
one selected ("match 2 of 5"), next and previous wrapping around with a note, and replace / replace all (one
undo step each). Esc closes it and hands the focus back to the editor."""

from __future__ import annotations

import re
from collections.abc import Sequence

from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Button, Input, Label
from textual.widgets.text_area import Location, Selection

from app.storage.config import KeysSection
from ui.bindings import bindings, key_label
from ui.editor import SharpenEditor

Match = tuple[Location, Location]


def find_all(lines: Sequence[str], query: str) -> list[Match]:
    """Every match of `query` in the document's lines, ignoring case (a query has no line break)."""
    if not query:
        return []
    pattern = re.compile(re.escape(query), re.IGNORECASE)
    return [((row, m.start()), (row, m.end())) for row, line in enumerate(lines) for m in pattern.finditer(line)]


class FindBar(Vertical):
    BINDINGS = bindings("find_bar")

    def __init__(self, editor: SharpenEditor, keys: KeysSection, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.editor = editor
        self.keys = keys
        self.matches: list[Match] = []
        self.current: int | None = None  # index into matches of the selected one
        self.note = ""

    def compose(self) -> ComposeResult:
        with Horizontal(classes="find-row"):
            yield Label("find", classes="find-label")
            steps = f"{key_label(self.keys, 'find_next')} / {key_label(self.keys, 'find_previous')}"
            yield Input(placeholder=f"find (enter: next, {steps})", id="find-query", compact=True)
            yield Label("", id="find-count")
        with Horizontal(classes="find-row", id="replace-row"):
            yield Label("replace", classes="find-label")
            yield Input(placeholder="replace with (enter: replace and find next)", id="find-replacement", compact=True)
            yield Button("replace", id="replace-one", compact=True)
            yield Button("replace all", id="replace-all", compact=True)

    @property
    def is_open(self) -> bool:
        return self.has_class("open")

    @property
    def query_input(self) -> Input:
        return self.query_one("#find-query", Input)

    @property
    def replacement_input(self) -> Input:
        return self.query_one("#find-replacement", Input)

    # ----- opening and closing ---------------------------------------------------------------------

    def open(self, *, replace: bool) -> None:
        """Show the bar (with the replace row for replace); a selection within one line becomes the query."""
        selected = self.editor.selected_text
        if selected and "\n" not in selected and "\r" not in selected:
            with self.query_input.prevent(Input.Changed):
                self.query_input.value = selected
        self.add_class("open")
        self.set_class(replace, "replacing")
        self.refresh_matches()
        self._choose(self._index_from(self._selection_top(), inclusive=True), "")
        target = self.replacement_input if replace and self.query_input.value else self.query_input
        target.focus()

    def action_close(self) -> None:
        self.remove_class("open", "replacing")
        self.matches, self.current = [], None
        self.editor.show_matches([])
        self.editor.focus()

    # ----- finding ---------------------------------------------------------------------------------

    def refresh_matches(self) -> None:
        """Search again (the query or the text changed); keeps the current match if it is still one."""
        self.matches = find_all(self.editor.document.lines, self.query_input.value)
        selection = tuple(sorted(self.editor.selection))
        self.current = next((i for i, match in enumerate(self.matches) if match == selection), None)
        self.editor.show_matches(self.matches)
        self._show_count()

    def find_next(self) -> None:
        self.refresh_matches()
        if self.current is not None:
            index: int | None = self.current + 1 if self.current + 1 < len(self.matches) else None
        else:
            index = self._index_from(self._selection_bottom(), inclusive=True)
        wrapped = index is None and bool(self.matches)
        self._choose(0 if wrapped else index, "wrapped to the start" if wrapped else "")

    def find_previous(self) -> None:
        self.refresh_matches()
        top = self._selection_top()
        before = [i for i, (start, _) in enumerate(self.matches) if start < top]
        wrapped = not before and bool(self.matches)
        self._choose(len(self.matches) - 1 if wrapped else (before[-1] if before else None), "")
        if wrapped:
            self._set_note("wrapped to the end")

    def _selection_top(self) -> Location:
        return min(self.editor.selection)

    def _selection_bottom(self) -> Location:
        return max(self.editor.selection)

    def _index_from(self, location: Location, *, inclusive: bool) -> int | None:
        for i, (start, _) in enumerate(self.matches):
            if start > location or (inclusive and start == location):
                return i
        return None

    def _choose(self, index: int | None, note: str) -> None:
        self.current = index
        if index is not None:
            start, end = self.matches[index]
            self.editor.selection = Selection(start, end)
            self.editor.scroll_cursor_visible(center=True)
        self._set_note(note)

    def _set_note(self, note: str) -> None:
        self.note = note
        self._show_count()

    def _show_count(self) -> None:
        if not self.query_input.value:
            text = ""
        elif not self.matches:
            text = "no matches"
        elif self.current is None:
            text = f"{len(self.matches)} matches"
        else:
            text = f"match {self.current + 1} of {len(self.matches)}"
        if self.note:
            text = f"{text} · {self.note}" if text else self.note
        self.query_one("#find-count", Label).update(text)

    @on(Input.Changed, "#find-query")
    def _query_changed(self) -> None:
        """Find as you type: the first match from where the selection starts."""
        self.refresh_matches()
        index = self._index_from(self._selection_top(), inclusive=True)
        wrapped = index is None and bool(self.matches)
        self._choose(0 if wrapped else index, "wrapped to the start" if wrapped else "")

    @on(Input.Submitted, "#find-query")
    def _query_submitted(self) -> None:
        self.find_next()

    # ----- replacing -------------------------------------------------------------------------------

    @on(Input.Submitted, "#find-replacement")
    @on(Button.Pressed, "#replace-one")
    def replace_one(self) -> None:
        """Replace the selected match and select the next one; with no match selected, find the next first."""
        self.refresh_matches()
        if self.current is None:
            self.find_next()
            return
        start, end = self.matches[self.current]
        editor = self.editor
        editor.history.checkpoint()
        result = editor.replace(self.replacement_input.value, start, end)
        editor.history.checkpoint()
        editor.move_cursor(result.end_location)
        self.refresh_matches()
        index = self._index_from(result.end_location, inclusive=True)
        wrapped = index is None and bool(self.matches)
        self._choose(0 if wrapped else index, "wrapped to the start" if wrapped else "")

    @on(Button.Pressed, "#replace-all")
    def replace_all(self) -> None:
        """Every match replaced in one edit (one undo step): the span from the first match to the last."""
        self.refresh_matches()
        if not self.matches:
            self._set_note("nothing replaced")
            return
        editor, count = self.editor, len(self.matches)
        first, last = self.matches[0][0], self.matches[-1][1]
        pattern = re.compile(re.escape(self.query_input.value), re.IGNORECASE)
        replacement = self.replacement_input.value
        span = editor.get_text_range(first, last)
        editor.history.checkpoint()
        editor.replace(pattern.sub(lambda _match: replacement, span), first, last)
        editor.history.checkpoint()
        self.refresh_matches()
        self._set_note(f"replaced {count}")
