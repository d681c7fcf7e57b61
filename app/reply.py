"""What one request asks for and what it gets back, for every front end (the TUI, the CLI).

In the shape of simonw/llm's `Model.prompt() -> Response`: SharpenService takes a request, routes it,
resolves its settings and picks the engine, and hands back a Reply. Iterating the Reply runs the engine
(in the caller's thread: the TUI's worker, the CLI's main thread) and yields its events; afterwards the
Reply holds its passes, its final text and stats, and builds its own trace and JSON.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import KW_ONLY, dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from app.context import ContextUse, rewrite_instruction
from engines.ar_engine import AREngine
from engines.diffusion.engine import DiffusionEngine
from engines.diffusion.schedule import timestep_passes
from engines.diffusion.settings import DiffusionSettings
from engines.diffusion.settled import settled_text
from engines.diffusion.trace import Trace, TraceHeader
from engines.events import DiffusionStats, Done, Event, Pass
from engines.messages import ChatMessage
from router.request import EngineName, Kind, Policy, Quality, Route

DraftKind = Literal["draft", "infill"]


@dataclass(frozen=True)
class DraftRequest:
    """A draft written at the cursor, or a rewrite of the selection, as the user asked for it.

    - `draft` with an instruction: text that answers it, written to fit between `before` and `after` (the
      document around the cursor); without one, what belongs at the cursor.
    - `infill` (a rewrite): new text for `selection`, between `before` and `after`, following the
      instruction where there is one.
    """

    kind: DraftKind
    instruction: str = ""
    _: KW_ONLY
    # The document before and after the cursor (or the selection); the service fits them to the model.
    before: str = ""
    after: str = ""
    # The text a rewrite replaces.
    selection: str = ""
    # None: the configured diffusion.tokens.
    tokens: int | None = None
    # DiffusionSettings options given for this request only (the command line's flags); fixing `steps`
    # here keeps them, instead of the router's K.
    overrides: Mapping[str, Any] = field(default_factory=dict)
    engine: EngineName | None = None
    policy: Policy | None = None
    quality: Quality | None = None
    # False: the instruction is plain text, not put through the model's chat template.
    chat: bool = True
    # Turns of a conversation before the instruction (a system message, earlier replies): a draft answers
    # the whole conversation.
    history: tuple[ChatMessage, ...] = ()
    # The text ends before the first of these (a diffusion draft stops refining once one has settled).
    stop: tuple[str, ...] = ()

    @property
    def asked(self) -> str:
        """What the model is asked to do ("" for none: write what belongs in the gap)."""
        if self.kind == "infill" and self.instruction.strip():
            return rewrite_instruction(self.instruction, self.selection)
        return self.instruction if self.instruction.strip() else ""

    def conversation(self, asked: str | None = None) -> str | list[ChatMessage]:
        """What the model answers: the request (`asked`, or what the user asked) alone, or the conversation
        that ends with it."""
        asked = self.asked if asked is None else asked
        if not self.history:
            return asked
        return [*self.history, {"role": "user", "content": asked}]

    @property
    def recorded_prompt(self) -> str:
        """The prompt as a trace records it: a gap in the document shows where it was."""
        if self.kind == "draft" and not (self.before or self.after):
            return self.instruction
        gap = f"{self.before[-200:]}\u2026{self.after[:200]}"
        return f"{self.instruction}\n\n{gap}" if self.instruction.strip() else gap


# Opens the engine's stream: returns the events and the engine that yields them.
Opener = Callable[[], tuple[Iterator[Event], "AREngine | DiffusionEngine"]]


class Reply:
    """One request's answer. Iterate it once for the events; then `done`, `passes`, `trace()`, `as_json()`."""

    def __init__(
        self,
        route: Route,
        opener: Opener,
        *,
        kind: Kind,
        tokens: int,
        settings: DiffusionSettings | None = None,
        prompt: str = "",
    ) -> None:
        self.route = route
        self.tokens = tokens
        # The settings a diffusion draft runs with (None when AR serves it).
        self.settings = settings
        self.kind = kind
        self.prompt = prompt
        # Appended as the passes come (by the thread that iterates); readers take the newest one.
        self.passes: list[Pass] = []
        self.done: Done | None = None
        self.started = time.perf_counter()
        self._opener: Opener | None = opener
        self._engine: AREngine | DiffusionEngine | None = None
        # What the model was given of the document around the cursor (set when the reply runs).
        self.context: ContextUse | None = None
        self._created = ""

    def __iter__(self) -> Iterator[Event]:
        if self._opener is None:
            raise RuntimeError("a reply's events are read once")
        opener, self._opener = self._opener, None
        self.started = time.perf_counter()
        self._created = datetime.now(UTC).isoformat(timespec="seconds")
        events, self._engine = opener()
        for event in events:
            if isinstance(event, Pass):
                self.passes.append(event)
            elif isinstance(event, Done):
                self.done = event
            yield event

    def text(self) -> str:
        """The final text, running the request first if nobody has."""
        if self._opener is not None:
            for _event in self:
                pass
        assert self.done is not None, "every stream ends with Done"
        return self.done.text

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
        """The passes a fixed-step diffusion draft will take; None if the text decides (AR, a threshold)."""
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
        if not isinstance(engine, DiffusionEngine):
            return event.stable_text
        return settled_text(event, engine.backend.decode)

    def trace(self) -> Trace | None:
        """The refinement trace of a finished (or cancelled) diffusion draft; None for AR or before the end."""
        engine, done = self._engine, self.done
        if not isinstance(engine, DiffusionEngine) or done is None or self.settings is None:
            return None
        stats = done.stats
        assert isinstance(stats, DiffusionStats), "a diffusion engine ends with DiffusionStats"
        header = TraceHeader(
            model=engine.model_name,
            backend=engine.backend.backend,
            prompt=self.prompt,
            prompt_tokens=stats.prompt_tokens,
            canvas_length=stats.canvas_tokens,
            mask_token_id=engine.backend.mask_token_id,
            settings=self.settings.as_dict(),
            created=self._created,
            kind=self.kind,
        )
        trace = Trace(header, passes=list(self.passes))
        trace.record(done)
        return trace

    def as_json(self) -> dict[str, Any]:
        """What `--json` prints: the text, who served it, its stats, and a diffusion draft's settings."""
        if self.done is None:
            raise RuntimeError("a reply is described once it has run")
        payload: dict[str, Any] = {"text": self.done.text, "engine": self.engine, "model": self.model}
        payload |= self.done.stats.as_json()
        if self.settings is not None:
            payload["settings"] = self.settings.as_dict()
        if self.context is not None:
            payload["context"] = self.context.as_json()
        return payload
