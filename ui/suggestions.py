"""Ghost-text bookkeeping that needs no widget: the prefix cache and the trigger guard."""

from __future__ import annotations

from collections import OrderedDict


class SuggestionCache:
    """Recent completions by the text they continued, with prefix reuse.

    If the user types the first characters of a suggestion, the rest of it is still a valid suggestion
    for the longer text: `lookup` finds it without a new request.
    """

    def __init__(self, capacity: int = 500) -> None:
        self.capacity = capacity
        self._entries: OrderedDict[str, str] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def store(self, prefix: str, completion: str) -> None:
        if not completion:
            return
        self._entries[prefix] = completion
        self._entries.move_to_end(prefix)
        while len(self._entries) > self.capacity:
            self._entries.popitem(last=False)

    def lookup(self, prefix: str) -> str | None:
        exact = self._entries.get(prefix)
        if exact is not None:
            self._entries.move_to_end(prefix)
            return exact
        # Look back over the last few characters typed: was the text then continued by what was typed since?
        for cut in range(len(prefix) - 1, max(-1, len(prefix) - 64), -1):
            earlier = prefix[:cut]
            completion = self._entries.get(earlier)
            if completion is None:
                continue
            typed = prefix[cut:]
            if completion.startswith(typed) and len(completion) > len(typed):
                return completion[len(typed) :]
        return None


def should_suggest(line_after_cursor: str, max_chars_right: int) -> bool:
    """No automatic suggestion in the middle of a line (more than a few characters right of the cursor)."""
    return len(line_after_cursor.rstrip()) <= max_chars_right


def fit_to_line(completion: str, at_end_of_line: bool) -> str:
    """Multi-line suggestions only at the end of a line; elsewhere, the rest of the current line."""
    if at_end_of_line:
        return completion
    return completion.split("\n", 1)[0]
