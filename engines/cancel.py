"""A cancellation flag shared between the caller's thread and a generating engine."""

from __future__ import annotations

import threading


class CancelToken:
    """Set by whoever no longer wants the result; engines check it between tokens or passes. A token with a
    parent is also cancelled when its parent is (a request's own reason to stop, beside its caller's)."""

    def __init__(self, parent: CancelToken | None = None) -> None:
        self._event = threading.Event()
        self._parent = parent

    def cancel(self) -> None:
        self._event.set()

    @property
    def cancelled(self) -> bool:
        return self._event.is_set() or (self._parent is not None and self._parent.cancelled)

    @property
    def cancelled_here(self) -> bool:
        """Cancelled through this token itself, not its parent."""
        return self._event.is_set()


NEVER_CANCELLED = CancelToken()
