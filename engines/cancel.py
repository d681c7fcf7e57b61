"""A cancellation flag shared between the caller's thread and a generating engine."""

from __future__ import annotations

import threading


class CancelToken:
    """Set by whoever no longer wants the result; engines check it between tokens or passes."""

    def __init__(self) -> None:
        self._event = threading.Event()

    def cancel(self) -> None:
        self._event.set()

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()


NEVER_CANCELLED = CancelToken()
