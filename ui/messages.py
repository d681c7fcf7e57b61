"""Messages from worker threads to the UI: plain data, posted, never blocking the worker."""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message

from engines.events import Done


class SuggestionReady(Message):
    def __init__(self, request_id: int, prefix: str, completion: str) -> None:
        super().__init__()
        self.request_id = request_id
        self.prefix = prefix
        self.completion = completion


class DraftPass(Message):
    """A new pass is ready (the newest one is in the reply's pass list when this is handled)."""


@dataclass
class DraftText(Message):
    """Text streamed by the AR engine when the router sends a draft there."""

    text: str
    tokens: int
    elapsed_s: float


@dataclass
class DraftFinished(Message):
    done: Done


@dataclass
class DraftFailed(Message):
    error: str
