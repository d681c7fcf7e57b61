"""The document editor: a TextArea with ghost-text autocomplete, the find bar's matches highlighted, moves to
the document's start and end, and Markdown highlighting for Markdown files."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.style import Style
from rich.text import Text
from textual import work
from textual.actions import SkipAction
from textual.widgets import TextArea
from textual.widgets.text_area import Location

from app.errors import SharpenError
from engines.cancel import CancelToken
from ui.bindings import bindings
from ui.suggestions import SuggestionCache, fit_to_line, should_suggest

NEXT_WORD = re.compile(r"\s*\S+")
MARKDOWN_SUFFIXES = {".md", ".markdown"}

# Continues the text before the cursor (with the text after it): prefix, suffix, cancel -> completion.
# Blocking: the editor runs it in a thread.
Completer = Callable[[str, str, CancelToken], str]


@dataclass(frozen=True)
class CursorText:
    """The document split at the cursor: what a completion is asked for, and what it must still match."""

    before: str
    after: str

    @property
    def line_rest(self) -> str:
        return self.after.split("\n", 1)[0]


class SharpenEditor(TextArea):
    """After an edit (and a pause in typing), asks the completer for a suggestion and shows it as ghost text."""

    BINDINGS = bindings("editor")

    def __init__(self, complete: Completer, *, debounce_s: float, max_chars_right: int = 8, **kwargs: Any) -> None:
        super().__init__("", soft_wrap=True, **kwargs)
        self.complete = complete
        self.debounce_s = debounce_s
        self.cache = SuggestionCache()
        self.autocomplete = True
        # Set when the completer fails; turning autocomplete on (or a new model) clears it.
        self.completions_failed = False
        self.max_chars_right = max_chars_right
        self._completion_cancel = CancelToken()
        self._anchor: tuple[int, int] | None = None
        # The find bar's matches, by line: (start column, end column).
        self._matches: dict[int, list[tuple[int, int]]] = {}

    # ----- asking ----------------------------------------------------------------------------------

    def load_text(self, text: str) -> None:
        """A new text (another file, a recovered autosave): the suggestion for the old one goes."""
        self._completion_cancel.cancel()
        self.suggestion = ""
        super().load_text(text)

    def update_suggestion(self) -> None:
        """Runs after every edit. Typing into a suggestion keeps its rest; otherwise ask (or use the cache)."""
        self._completion_cancel.cancel()  # whatever was in flight is now stale
        if self.suggestion:
            self._anchor = self.cursor_location
            return
        if not self.autocomplete or not self.selection.is_empty or not self.text.strip():
            return
        at_cursor = self.cursor_text()
        if not should_suggest(at_cursor.line_rest, self.max_chars_right):
            return
        cached = self.cache.lookup(at_cursor.before)
        if cached:
            self._show(cached, at_cursor.line_rest)
            return
        if self.completions_failed:
            return
        self._completion_cancel = CancelToken()
        self._suggest(at_cursor, self._completion_cancel)

    @work(exclusive=True, group="suggestion", exit_on_error=False)
    async def _suggest(self, asked: CursorText, cancel: CancelToken) -> None:
        """Wait for a pause in typing (a newer edit replaces this worker), then complete in a thread."""
        await asyncio.sleep(self.debounce_s)
        try:
            completion = await asyncio.to_thread(self.complete, asked.before, asked.after, cancel)
        except SharpenError as error:
            self.completions_failed = True
            self.notify(f"autocomplete is off: {error}", severity="error", timeout=10)
            return
        if not cancel.cancelled:  # a cancelled completion stopped part way
            self.offer(asked, completion)

    def offer(self, asked: CursorText, completion: str) -> bool:
        """A completion arrived. Shown only if the text and the cursor are as they were when it was asked for."""
        self.cache.store(asked.before, completion)
        if self.suggestion or not self.autocomplete or not self.selection.is_empty or self.cursor_text() != asked:
            return False
        return self._show(completion, asked.line_rest)

    def _show(self, completion: str, line_rest: str) -> bool:
        fitted = fit_to_line(completion, at_end_of_line=not line_rest.strip())
        if not fitted.strip():
            return False
        self.suggestion = fitted
        self._anchor = self.cursor_location
        return True

    def cursor_text(self) -> CursorText:
        return CursorText(
            self.get_text_range((0, 0), self.cursor_location),
            self.get_text_range(self.cursor_location, self.document.end),
        )

    def on_text_area_selection_changed(self, _event: TextArea.SelectionChanged) -> None:
        # A cursor move (not an edit, which re-anchors the suggestion first) drops the suggestion.
        if self.suggestion and self.cursor_location != self._anchor:
            self.suggestion = ""

    def on_unmount(self) -> None:
        self._completion_cancel.cancel()

    # ----- keys ------------------------------------------------------------------------------------

    def action_accept_suggestion(self) -> None:
        if not self.suggestion:
            raise SkipAction()
        self.insert(self.suggestion)

    def action_accept_word(self) -> None:
        match = NEXT_WORD.match(self.suggestion)
        if not self.suggestion or match is None:
            raise SkipAction()
        self.insert(match.group(0))

    def action_dismiss_suggestion(self) -> None:
        if not self.suggestion:
            raise SkipAction()
        self.suggestion = ""
        self._completion_cancel.cancel()

    def set_autocomplete(self, enabled: bool) -> None:
        self.autocomplete = enabled
        self.completions_failed = False
        if not enabled:
            self.suggestion = ""
            self._completion_cancel.cancel()

    # ----- the document's start and end ------------------------------------------------------------

    def action_doc_start(self) -> None:
        self.move_cursor((0, 0))

    def action_doc_end(self) -> None:
        self.move_cursor(self.document.end)

    def action_select_to_start(self) -> None:
        self.move_cursor((0, 0), select=True)

    def action_select_to_end(self) -> None:
        self.move_cursor(self.document.end, select=True)

    # ----- the find bar's matches and the language ------------------------------------------------

    def show_matches(self, matches: Sequence[tuple[Location, Location]]) -> None:
        """Highlight these ranges (each within one line) until the next call; an empty list clears them."""
        by_line: dict[int, list[tuple[int, int]]] = {}
        for (row, start), (_, end) in matches:
            by_line.setdefault(row, []).append((start, end))
        if by_line == self._matches:
            return
        self._matches = by_line
        self._line_cache.clear()  # TextArea caches rendered lines by what it knows changes them: not our matches
        self.refresh()

    def get_line(self, line_index: int) -> Text:
        """TextArea's hook for styling a line: the find bar's matches get the theme's warning colour."""
        line = super().get_line(line_index)
        matches = self._matches.get(line_index)
        if matches:
            # Underlined too: on the cursor's line TextArea's cursor-line style paints over the colours.
            style = Style(bgcolor=self.app.current_theme.warning or "yellow", color="black", underline=True)
            for start, end in matches:
                line.stylize(style, start, end)
        return line

    def use_language_of(self, path: Path | None) -> None:
        """Markdown highlighting for a Markdown file (tree-sitter), plain text for anything else."""
        markdown = path is not None and path.suffix.lower() in MARKDOWN_SUFFIXES
        language = "markdown" if markdown and "markdown" in self.available_languages else None
        if language != self.language:
            selection = self.selection  # setting the language reloads the document, cursor at the start
            self.language = language
            self.selection = selection
