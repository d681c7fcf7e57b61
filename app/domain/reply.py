"""What one request gets back, for every front end (the TUI, the CLI, the server).

In the shape of simonw/llm's `Model.prompt() -> Response`: SharpenService takes a request, routes it and
hands the route and the job the chosen engine's drafter made (app/orchestration/drafters.py) to a Reply.
Iterating the Reply opens the job (in the caller's thread: the TUI's worker, the CLI's main thread) and
yields its events; afterwards the Reply holds its passes, its final text and stats, what the model was
given of the document, and builds its own trace and JSON.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from app.domain.context import ContextUse
from app.domain.draft_check import CheckedDraft, CheckRecord
from app.domain.figures import DraftFigures
from app.domain.job import Job
from engines.ar_engine import AREngine
from engines.diffusion.engine import DiffusionEngine
from engines.diffusion.schedule import timestep_passes
from engines.diffusion.settings import DiffusionSettings
from engines.diffusion.settled import settled_text
from engines.events import DiffusionStats, Done, Event, Pass, Token
from engines.remote_draft import RemoteDraft
from engines.trace import NO_MASK, TokenArrival, Trace, TraceHeader
from router.request import EngineName, Kind, Route


class Reply:
    """One request's answer. Iterate it once for the events; then `done`, `passes`, `trace()`, `as_json()`."""

    def __init__(
        self,
        route: Route,
        job: Job,
        *,
        kind: Kind,
        prompt: str = "",
        finished: Callable[[Reply], None] | None = None,
    ) -> None:
        self.route = route
        # Called with the reply once its Done arrives, before Done is passed on (the service learns costs).
        self._finished = finished
        self.tokens = job.tokens
        # The settings a diffusion draft runs with (None when AR serves it).
        self.settings: DiffusionSettings | None = job.settings
        self.kind = kind
        self.prompt = prompt
        # Appended as the passes (diffusion) or the tokens (AR, with when each arrived) come, by the thread that
        # iterates; readers take the newest one.
        self.passes: list[Pass] = []
        self.written: list[TokenArrival] = []
        self.done: Done | None = None
        self.started = time.perf_counter()
        self._job: Job | None = job
        self._engine: AREngine | DiffusionEngine | RemoteDraft | None = None
        # What the model was given of the document around the cursor (known once the reply runs).
        self.context: ContextUse | None = None
        # Where a draft checked against its instruction records its tries (known once the reply runs).
        self._checked: CheckRecord | None = None
        self._created = ""

    def __iter__(self) -> Iterator[Event]:
        if self._job is None:
            raise RuntimeError("a reply's events are read once")
        job, self._job = self._job, None
        self.started = time.perf_counter()
        self._created = datetime.now(UTC).isoformat(timespec="seconds")
        opened = job.open()
        self._engine, self.context, self._checked = opened.engine, opened.context, opened.checked
        # Tokens are timed from here, as the engines time their passes and stats: from the start of the call,
        # the model already loaded.
        begun = time.perf_counter()
        for event in opened.events:
            if isinstance(event, Pass):
                self.passes.append(event)
            elif isinstance(event, Token):
                arrived = time.perf_counter() - begun
                self.written.append(TokenArrival(event.index, event.token_id, event.text, arrived))
            elif isinstance(event, Done):
                self.done = event
                if self._finished is not None:
                    self._finished(self)
            yield event

    def text(self) -> str:
        """The final text, running the request first if nobody has."""
        if self._job is not None:
            for _event in self:
                pass
        assert self.done is not None, "every stream ends with Done"
        return self.done.text

    @property
    def checked(self) -> CheckedDraft | None:
        """How a draft checked against its instruction fared, once done: its tries and the facts it still
        misses (None for a reply that was not checked)."""
        return self._checked.outcome if self._checked is not None else None

    @property
    def elapsed_s(self) -> float:
        return time.perf_counter() - self.started

    @property
    def engine(self) -> EngineName:
        return self.route.engine

    @property
    def model(self) -> str:
        """The model that served the request (the route's model name until it has run)."""
        return self._engine.model_name if self._engine is not None else self.route.model

    @property
    def planned_passes(self) -> int | None:
        """The passes a fixed-step diffusion draft will take as planned now: the newest pass's count (the
        sampler adds passes where the end-of-text rule holds masks back), before the first the settings'.
        None if the text decides (AR, a threshold)."""
        if self.passes:
            return self.passes[-1].planned_passes
        settings = self.settings
        if settings is None or settings.threshold is not None:
            return None
        if settings.schedule == "timestep":
            return (
                None if settings.algorithm == "origin" else timestep_passes(self.tokens, settings.steps, settings.eps)
            )
        return settings.steps

    def settled_text(self, event: Pass) -> str:
        """A diffusion pass's settled text: what will no longer change, safe to stream."""
        engine = self._engine
        if isinstance(engine, RemoteDraft):
            return engine.settled(event)
        if not isinstance(engine, DiffusionEngine):
            return event.stable_text
        return settled_text(event, engine.decode)

    def trace(self) -> Trace | None:
        """How the finished (or cancelled) draft was written: a diffusion draft's passes, an AR draft's tokens as
        they arrived; None before the end, and for an AR reply that wrote nothing."""
        engine, done = self._engine, self.done
        if engine is None or done is None:
            return None
        if isinstance(engine, RemoteDraft) and engine.remote_trace is not None:
            return self._remote_trace(engine, engine.remote_trace, done)
        if isinstance(engine, RemoteDraft) and not self.passes:
            return None  # a text-only server's draft: nothing to play back
        if not isinstance(engine, DiffusionEngine | RemoteDraft):
            return self._ar_trace(engine, done) if self.written else None
        if self.settings is None:
            return None
        stats = done.stats
        assert isinstance(stats, DiffusionStats), "a diffusion engine ends with DiffusionStats"
        header = TraceHeader(
            model=engine.model_name,
            backend=engine.backend_name,
            prompt=self.prompt,
            prompt_tokens=stats.prompt_tokens,
            canvas_length=stats.canvas_tokens,
            mask_token_id=engine.mask_token_id,
            settings=self.settings.as_dict(),
            created=self._created,
            kind=self.kind,
        )
        trace = Trace(header, passes=list(self.passes))
        trace.record(done)
        return trace

    def _remote_trace(self, engine: RemoteDraft, remote: Trace, done: Done) -> Trace:
        """A draft on another machine's Sharpen, as its own trace kept it (the passes unrounded, its settings),
        recorded as this machine asked for it."""
        header = replace(
            remote.header,
            model=engine.model_name,
            backend=engine.backend_name,
            prompt=self.prompt,
            created=self._created,
            kind=self.kind,
        )
        trace = Trace(header, passes=list(remote.passes))
        trace.record(done)
        return trace

    def _ar_trace(self, engine: AREngine, done: Done) -> Trace:
        header = TraceHeader(
            model=engine.model_name,
            backend=engine.backend,
            prompt=self.prompt,
            prompt_tokens=done.stats.prompt_tokens,
            canvas_length=self.tokens,
            mask_token_id=NO_MASK,
            settings=self.route.settings,
            created=self._created,
            kind=self.kind,
            engine="ar",
        )
        trace = Trace(header, tokens=list(self.written))
        trace.record(done)
        return trace

    def figures(self) -> DraftFigures:
        """Who wrote the finished draft, how long it took, how fast and in how many steps."""
        if self.done is None:
            raise RuntimeError("a reply has figures once it has run")
        return DraftFigures.of(self.engine, self.model, self.done.stats)

    def as_json(self) -> dict[str, Any]:
        """What `--json` prints: the text, who served it, its stats, and a diffusion draft's settings."""
        if self.done is None:
            raise RuntimeError("a reply is described once it has run")
        payload: dict[str, Any] = {"text": self.done.text, "engine": self.engine, "model": self.model}
        payload |= self.done.stats.as_json()
        remote_settings = self._engine.settings if isinstance(self._engine, RemoteDraft) else None
        if remote_settings is not None:
            payload["settings"] = remote_settings
        elif self.settings is not None:
            payload["settings"] = self.settings.as_dict()
        if self.context is not None:
            payload["context"] = self.context.as_json()
        if self.checked is not None:
            payload["checked"] = self.checked.as_json()
        return payload
