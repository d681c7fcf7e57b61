"""Recording how long each finished draft ran (router/expected_lengths.py), so the next route's estimates are for the
length a draft will write."""

from __future__ import annotations

import threading

from app.storage.atomic import write_atomic
from engines.events import FinishReason
from router.expected_lengths import LEARNT_KINDS, WrittenDraft, render_lengths
from router.inputs import RouteInputs
from router.policy import SHORT_OUTPUT_TOKENS
from router.request import EngineName, Kind

# A draft that ended by itself: its length is known, not only a lower bound.
ENDED_BY_ITSELF: tuple[FinishReason, ...] = ("eos", "stop")


class DraftLengthLog:
    """Adds each finished draft to `draft-lengths.toml` (the file RouteInputs reads the lengths from)."""

    def __init__(self, routing: RouteInputs) -> None:
        self.routing = routing
        self._saving = threading.Lock()

    def record(
        self, engine: EngineName, kind: Kind, model: str, asked: int, written: int, finish: FinishReason
    ) -> None:
        """Add a finished draft to its engine's lengths. A cancelled draft says nothing of how long it would
        have run, and a draft asked for fewer than SHORT_OUTPUT_TOKENS goes to AR whatever the estimates
        (an editor's warm-up asks for one); a file that cannot be written loses this draft's length, never
        the draft."""
        if finish == "cancelled" or kind not in LEARNT_KINDS or asked < SHORT_OUTPUT_TOKENS:
            return
        draft = WrittenDraft(asked, min(written, asked), finish in ENDED_BY_ITSELF)
        path = self.routing.lengths_path
        with self._saving:
            # The routes' copy, read once per version of the file; an unreadable file is replaced by what is
            # learnt from now on.
            book = self.routing.draft_lengths()[0]
            try:
                write_atomic(path, render_lengths(book.recorded(engine, kind, model, draft)).encode("utf-8"))
            except OSError:
                return
