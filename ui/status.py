"""The status bar: engine and model, progress of the current draft, speed, the route's reason, and the
document's (and the selection's) word, character and line counts."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget


@dataclass(frozen=True)
class TextCounts:
    words: int
    chars: int  # line breaks not counted
    lines: int

    def describe(self) -> str:
        return f"{_plural(self.words, 'word')} · {_plural(self.chars, 'char')} · {_plural(self.lines, 'line')}"

    def describe_selection(self) -> str:
        """Shorter: the lines only when there are several."""
        lines = f" · {self.lines} lines" if self.lines > 1 else ""
        return f"sel {_plural(self.words, 'word')} · {_plural(self.chars, 'char')}{lines}"


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


class TextCounter:
    """Counts a document's lines as they stand after an edit. Each line's word count is kept by its text, so an
    edit re-splits only the lines it changed: about 1 ms for a 1 MB document against 15 ms for a full count."""

    def __init__(self) -> None:
        self._words: dict[str, int] = {}

    def count(self, lines: Sequence[str]) -> TextCounts:
        if len(self._words) > 2 * len(lines) + 1024:
            self._words = {}  # lines edited away
        known = self._words
        words = 0
        for line in lines:
            found = known.get(line)
            if found is None:
                found = known[line] = len(line.split())
            words += found
        return TextCounts(words, sum(map(len, lines)), len(lines))


def count_text(text: str) -> TextCounts:
    """A selection's counts (counted once per selection change)."""
    lines = text.splitlines() or [""]
    return TextCounts(len(text.split()), sum(map(len, lines)), len(lines))


@dataclass(frozen=True)
class StatusInfo:
    engine: str = ""
    model: str = ""
    passes: int = 0
    planned_passes: int | None = None
    tokens: int = 0
    tokens_per_s: float = 0.0
    elapsed_s: float = 0.0
    reason: str = ""
    state: str = "ready"
    autocomplete: bool = True
    counts: TextCounts | None = None
    selection: TextCounts | None = None

    def with_changes(self, **changes: Any) -> StatusInfo:
        """A copy with the fields named changed (the bar redraws when its info is replaced)."""
        return replace(self, **changes)


class StatusBar(Widget):
    DEFAULT_CSS = """
    StatusBar { height: 1; background: $panel; color: $text; padding: 0 1; }
    """

    info: reactive[StatusInfo] = reactive(StatusInfo)

    def render(self) -> Text:
        info = self.info
        parts = [Text(info.state, style="bold")]
        if info.engine:
            parts.append(Text(f"{info.engine} · {info.model}"))
        if info.engine == "diffusion" and info.passes:
            planned = f" of {info.planned_passes}" if info.planned_passes else ""
            parts.append(Text(f"pass {info.passes}{planned}"))
        if info.tokens:
            parts.append(Text(f"{info.tokens} tok · {info.tokens_per_s:.1f} tok/s · {info.elapsed_s:.1f} s"))
        if info.selection is not None:
            parts.append(Text(info.selection.describe_selection()))
        if info.counts is not None:
            parts.append(Text(info.counts.describe()))
        if info.reason:
            parts.append(Text(info.reason, style="italic"))
        parts.append(Text("ghost on" if info.autocomplete else "ghost off", style="dim"))
        return Text(" │ ").join(parts)
