"""Stop strings, for every engine and front end: where the first one starts, and how much of a text's end
might still be the start of one (held back until the next text says)."""

from __future__ import annotations

from collections.abc import Sequence


def first_stop(text: str, stop: Sequence[str]) -> int | None:
    hits = [at for at in (text.find(s) for s in stop if s) if at >= 0]
    return min(hits) if hits else None


def _held_back(text: str, stop: Sequence[str]) -> int:
    """Characters at the end of `text` that are the start of a stop string."""
    return max((n for s in stop for n in range(min(len(s) - 1, len(text)), 0, -1) if text.endswith(s[:n])), default=0)


def before_stops(text: str, stop: Sequence[str]) -> str:
    """The part of `text` that no stop string can still cut: up to the first stop, less any tail that could
    be the start of one."""
    cut = first_stop(text, stop)
    if cut is not None:
        return text[:cut]
    return text[: len(text) - _held_back(text, stop)]


class StopScanner:
    """Finds stop strings in streamed text and holds back text that might be the start of one."""

    def __init__(self, stop: Sequence[str]) -> None:
        self.stop = [s for s in stop if s]
        self.text = ""
        self.emitted = 0

    def feed(self, piece: str) -> tuple[str, bool]:
        """Add a piece; return the text that is now safe to show and whether a stop string was hit."""
        self.text += piece
        cut = first_stop(self.text, self.stop)
        if cut is not None:
            self.text = self.text[:cut]
            return self._release(len(self.text)), True
        return self._release(len(self.text) - _held_back(self.text, self.stop)), False

    def flush(self) -> str:
        return self._release(len(self.text))

    def _release(self, upto: int) -> str:
        upto = max(upto, self.emitted)
        out = self.text[self.emitted : upto]
        self.emitted = upto
        return out
