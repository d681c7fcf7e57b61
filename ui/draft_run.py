"""One candidate in the draft panel (a reply refining or finished, or a past draft reopened) and the messages
the panel's thread worker posts about it.

The messages name their run, so the panel drops a late message from a draft it has replaced.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from textual.message import Message

from app.domain.draft_request import DraftRequest
from app.domain.figures import DraftFigures
from app.domain.reply import Reply
from app.storage.draft_history import PastDraft
from engines.cancel import CancelToken
from engines.events import Done, Pass
from engines.trace import Trace
from router.request import EngineName, Route
from ui.draft_labels import CandidateState

DraftState = Literal["refining", "ready", "cancelled", "failed"]


@dataclass
class DraftRun:
    """One candidate in the panel: a reply refining or finished, or a past draft reopened from the history."""

    # None until the worker has routed the request, and for a past draft.
    reply: Reply | None
    cancel: CancelToken
    # The selection a rewrite replaces (it is replaced only if it is still selected on insert).
    original_selection: str = ""
    # What was asked: another candidate asks it again with a new seed.
    request: DraftRequest | None = None
    past: PastDraft | None = None
    # A past draft's trace, read once.
    past_trace: Trace | None = None
    state: DraftState = "refining"
    # Set when the panel has handled the end of the draft (the reply's own `done` is set a moment
    # earlier, by the worker thread).
    done: Done | None = None
    # True while a DraftPass message is queued: the worker then only appends, so a fast model
    # never floods the UI thread with more frames than it can draw (the newest pass wins).
    frame_queued: bool = False
    # For an engine the writer chose: the route the router would have given the request (its choice and its
    # estimates, which the panel shows beside the writer's).
    advice: Route | None = None

    @property
    def kind(self) -> str:
        if self.reply is not None:
            return self.reply.kind
        return self.past.kind if self.past is not None else "draft"

    @property
    def engine(self) -> EngineName | None:
        """The engine writing the draft (None until it is routed)."""
        if self.reply is not None:
            return self.reply.engine
        engine = self.past.engine if self.past is not None else ""
        return "ar" if engine == "ar" else "diffusion" if engine == "diffusion" else None

    @property
    def figures(self) -> DraftFigures | None:
        """A finished draft's engine, time and speed (None while it runs, and for a past draft)."""
        if self.state != "ready" or self.reply is None or self.reply.done is None:
            return None
        return self.reply.figures()

    def trace(self) -> Trace | None:
        """How the draft was written, for playback: its passes or its tokens (None before it ends)."""
        if self.reply is not None:
            return self.reply.trace() if self.done is not None else None
        return self.past_trace

    def label_state(self) -> CandidateState:
        return CandidateState(self.engine, self.figures, self.state)

    @property
    def passes(self) -> list[Pass]:
        if self.reply is not None:
            return self.reply.passes
        return self.past_trace.passes if self.past_trace is not None else []


@dataclass
class Routed(Message):
    """The service routed the draft: its reply is about to run. `advice`: for an engine the writer chose, what
    the router would have chosen."""

    run: DraftRun
    reply: Reply
    advice: Route | None = None


@dataclass
class PassReady(Message):
    """A new pass is ready (the newest one is in the reply's pass list when this is handled)."""

    run: DraftRun


@dataclass
class TextStreamed(Message):
    """Text streamed by the AR engine when the router sends a draft there."""

    run: DraftRun
    text: str
    tokens: int
    elapsed_s: float


@dataclass
class Finished(Message):
    run: DraftRun
    done: Done


@dataclass
class Failed(Message):
    run: DraftRun
    error: str


@dataclass
class DraftEnded(Message):
    """A draft finished (or was cancelled): its engine is free again. Bubbles up to the app."""

    run: DraftRun

    @property
    def engine(self) -> str:
        return self.run.reply.engine if self.run.reply is not None else ""
