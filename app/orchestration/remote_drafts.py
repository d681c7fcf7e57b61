"""The remote draft engine models.draft names (`sharpen:URL`, `openai:URL#MODEL`): its client, and how it
stands for routing.

Every route asks it how it stands (a status call: one round trip, which is also what the route adds for it).
A remote that does not answer, or a draft that could not reach it, is remembered as down for RETRY_AFTER_S,
so that routes do not wait on it again and again; drafts go to this machine meanwhile, and the route's
reason says why.
"""

from __future__ import annotations

import threading
import time

from engines.errors import EngineError
from engines.remote_diffusion import OpenAIRemote, RemoteStatus, SharpenRemote
from models.remote import RemoteDraftSource
from router.remote_draft import RemoteDraftState, remote_costs

RETRY_AFTER_S = 10.0
# How far one finished text-only draft moves the seconds per token its drafts are estimated at.
LEARNING_RATE = 0.5


class RemoteDrafts:
    def __init__(self, source: RemoteDraftSource, *, api_key: str) -> None:
        self.source = source
        self.client: SharpenRemote | OpenAIRemote = (
            SharpenRemote(source, api_key=api_key)
            if source.kind == "sharpen"
            else OpenAIRemote(source, api_key=api_key)
        )
        self._lock = threading.Lock()
        self._answer: tuple[float, RemoteStatus] | None = None
        self._down: tuple[float, str] | None = None
        # A text-only server's seconds per token, as its drafts took them from here.
        self._s_per_token: float | None = None

    @property
    def animated(self) -> bool:
        return self.source.animated

    def model_name(self, status: RemoteStatus | None = None) -> str:
        model = status.model if status is not None and status.model else self.source.model or "its draft model"
        return f"{model} at {self.source.base_url}"

    def state(self) -> RemoteDraftState:
        """How it stands now: asked, unless it was found down lately."""
        now = time.monotonic()
        with self._lock:
            down = self._down
        if down is not None and now - down[0] < RETRY_AFTER_S:
            return self._state(None, down[1])
        try:
            status = self.client.status()
        except EngineError as error:
            self.mark_down(str(error))
            return self._state(None, str(error))
        with self._lock:
            self._answer, self._down = (time.monotonic(), status), None
        if not status.present:
            return self._state(status, f"the remote draft engine ({self.source.label}) has no draft model to use")
        return self._state(status, "")

    def _state(self, status: RemoteStatus | None, down: str) -> RemoteDraftState:
        costs = remote_costs(
            status.costs if status is not None else None,
            status.round_trip_s if status is not None else 0.0,
            self._s_per_token,
        )
        return RemoteDraftState(self.source.label, self.model_name(status), down, costs, self.animated)

    def mark_down(self, why: str) -> None:
        """A remote that did not answer: routes leave it for RETRY_AFTER_S."""
        with self._lock:
            self._down, self._answer = (time.monotonic(), why), None

    def learn(self, took_s: float, tokens: int) -> None:
        """A text-only draft's time per token, from here: what its next drafts are estimated at."""
        with self._lock:
            answer, known = self._answer, self._s_per_token
        working_s = took_s - (answer[1].round_trip_s if answer is not None else 0.0)  # the round trip is apart
        if tokens < 1 or working_s <= 0:
            return
        measured = working_s / tokens
        with self._lock:
            self._s_per_token = measured if known is None else known + LEARNING_RATE * (measured - known)
