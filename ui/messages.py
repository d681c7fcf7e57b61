"""Messages from worker threads to the UI: plain data, posted, never blocking the worker."""

from __future__ import annotations

from textual.message import Message


class SuggestionReady(Message):
    def __init__(self, request_id: int, prefix: str, completion: str) -> None:
        super().__init__()
        self.request_id = request_id
        self.prefix = prefix
        self.completion = completion
