"""Each engine serves one request at a time; a bounded number wait their turn in order, more are refused."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable
from dataclasses import dataclass


class QueueFull(Exception):
    def __init__(self, engine: str, retry_after_s: int) -> None:
        super().__init__(f"the {engine} engine is busy and its queue is full: retry in {retry_after_s} s")
        self.retry_after_s = retry_after_s


@dataclass
class QueueCounts:
    served: int = 0
    cancelled: int = 0
    refused: int = 0
    failed: int = 0


class EngineQueue:
    def __init__(self, engine: str, waiting: int) -> None:
        self.engine = engine
        self.capacity = waiting + 1
        # Admitted requests: the one running and those waiting for their turn.
        self.admitted = 0
        self.running = False
        self.counts = QueueCounts()
        self._turn = asyncio.Lock()  # FIFO: waiters get their turn in the order they asked

    @property
    def waiting(self) -> int:
        return self.admitted - (1 if self.running else 0)

    def admit(self, estimate_s: Callable[[], float]) -> None:
        """Take a place in the queue, or raise QueueFull with a retry time from the request's cost estimate
        (asked for only then)."""
        if self.admitted >= self.capacity:
            self.counts.refused += 1
            raise QueueFull(self.engine, max(1, math.ceil(estimate_s() * self.admitted)))
        self.admitted += 1

    async def wait_turn(self) -> None:
        """Wait until this request may run; a cancelled wait gives its place back."""
        try:
            await self._turn.acquire()
        except asyncio.CancelledError:
            self.admitted -= 1
            self.counts.cancelled += 1
            raise
        self.running = True

    def finish(self, outcome: str) -> None:
        """The running request's thread has ended: the next one may run."""
        self.running = False
        self.admitted -= 1
        setattr(self.counts, outcome, getattr(self.counts, outcome) + 1)
        self._turn.release()

    def as_json(self) -> dict[str, object]:
        return {"running": self.running, "waiting": self.waiting, "capacity": self.capacity} | vars(self.counts)
