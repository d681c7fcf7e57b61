"""The document editor: a TextArea with ghost-text autocomplete."""

from __future__ import annotations

import re
from typing import Any

from textual.actions import SkipAction
from textual.binding import Binding
from textual.message import Message
from textual.widgets import TextArea

from ui.suggestions import SuggestionCache, fit_to_line, should_suggest

NEXT_WORD = re.compile(r"\s*\S+")


class SharpenEditor(TextArea):
    """Asks for a suggestion after edits (the app debounces and runs the request), shows it as ghost text."""

    BINDINGS = [
        Binding("tab", "accept_suggestion", "Accept", show=False, priority=True, id="sharpen.accept_suggestion"),
        Binding("ctrl+right", "accept_word", "Accept word", show=False, priority=True, id="sharpen.accept_word"),
        Binding("escape", "dismiss_suggestion", "Dismiss", show=False, priority=True, id="sharpen.dismiss"),
    ]

    class SuggestionWanted(Message):
        def __init__(self, request_id: int, prefix: str, suffix: str) -> None:
            super().__init__()
            self.request_id = request_id
            self.prefix = prefix
            self.suffix = suffix

    def __init__(self, text: str = "", *, max_chars_right: int = 8, **kwargs: Any) -> None:
        super().__init__(text, soft_wrap=True, **kwargs)
        self.cache = SuggestionCache()
        self.autocomplete = True
        self.max_chars_right = max_chars_right
        self.request_id = 0
        self._anchor: tuple[int, int] | None = None

    # ----- asking ----------------------------------------------------------------------------------

    def update_suggestion(self) -> None:
        """Runs after every edit. Typing into a suggestion keeps its rest; otherwise ask (or use the cache)."""
        self.request_id += 1  # whatever was in flight is now stale
        if self.suggestion:
            self._anchor = self.cursor_location
            return
        if not self.autocomplete or not self.selection.is_empty or not self.text.strip():
            return
        prefix, suffix, line_rest = self._split_at_cursor()
        if not should_suggest(line_rest, self.max_chars_right):
            return
        cached = self.cache.lookup(prefix)
        if cached:
            self._show(cached, line_rest)
            return
        self.post_message(self.SuggestionWanted(self.request_id, prefix, suffix))

    def offer(self, request_id: int, prefix: str, completion: str) -> bool:
        """A completion arrived. Shown only if nothing changed since it was asked for."""
        self.cache.store(prefix, completion)
        if request_id != self.request_id or self.suggestion or not self.autocomplete:
            return False
        current_prefix, _suffix, line_rest = self._split_at_cursor()
        if current_prefix != prefix or not self.selection.is_empty:
            return False
        return self._show(completion, line_rest)

    def _show(self, completion: str, line_rest: str) -> bool:
        fitted = fit_to_line(completion, at_end_of_line=not line_rest.strip())
        if not fitted.strip():
            return False
        self.suggestion = fitted
        self._anchor = self.cursor_location
        return True

    def _split_at_cursor(self) -> tuple[str, str, str]:
        row, column = self.cursor_location
        lines = self.text.split("\n")
        before = "\n".join([*lines[:row], lines[row][:column]])
        line_rest = lines[row][column:]
        after = "\n".join([line_rest, *lines[row + 1 :]])
        return before, after, line_rest

    def on_text_area_selection_changed(self, _event: TextArea.SelectionChanged) -> None:
        # A cursor move (not an edit, which re-anchors the suggestion first) drops the suggestion.
        if self.suggestion and self.cursor_location != self._anchor:
            self.suggestion = ""

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
        self.request_id += 1

    def set_autocomplete(self, enabled: bool) -> None:
        self.autocomplete = enabled
        if not enabled:
            self.suggestion = ""
            self.request_id += 1
