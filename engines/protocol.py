"""The small protocol every engine follows."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

from engines.cancel import CancelToken
from engines.events import EngineInfo, Event


class CompletionEngine(Protocol):
    """An engine that continues text token by token (autocomplete, short instructions)."""

    def complete(
        self,
        prefix: str,
        suffix: str | None = None,
        *,
        max_tokens: int,
        stop: tuple[str, ...] = (),
        temperature: float = 0.0,
        cancel: CancelToken | None = None,
    ) -> Iterator[Event]: ...

    def chat(
        self,
        instruction: str,
        *,
        max_tokens: int,
        temperature: float = 0.0,
        cancel: CancelToken | None = None,
    ) -> Iterator[Event]: ...

    def info(self) -> EngineInfo: ...
