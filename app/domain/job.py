"""A request ready to run on its engine: what a drafter hands the Reply, and what opening it gives back."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from app.domain.context import ContextUse
from app.domain.draft_check import CheckRecord
from engines.ar_engine import AREngine
from engines.diffusion.engine import DiffusionEngine
from engines.diffusion.settings import DiffusionSettings
from engines.events import Event
from engines.remote_draft import RemoteDraft


@dataclass(frozen=True)
class Opened:
    """A job's running stream, the engine that yields it, what the model was given of the document (None
    for a request without one), and where a draft checked against its instruction records how it fared."""

    events: Iterator[Event]
    engine: AREngine | DiffusionEngine | RemoteDraft
    context: ContextUse | None = None
    checked: CheckRecord | None = None


@dataclass(frozen=True)
class Job:
    """One request, ready to run on its engine: `tokens` long, with a diffusion draft's `settings`."""

    tokens: int
    start: Callable[[], Opened]
    settings: DiffusionSettings | None = None

    def open(self) -> Opened:
        return self.start()
