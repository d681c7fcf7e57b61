"""A Reply read in a thread of its own, its events handed to the event loop; a client that goes cancels it."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Awaitable, Callable
from typing import TypeVar

from starlette.requests import Request

from app.domain.reply import Reply
from engines.cancel import CancelToken
from engines.events import Done, Event

T = TypeVar("T")
_END = object()


class ClientGone(Exception):
    """The client closed its connection before the answer was complete."""


class ReplyRun:
    """Iterates `reply` in a thread; `next()` awaits its events. `on_end(outcome)` runs on the event loop
    once the thread has finished, whatever happened (served, cancelled or failed)."""

    def __init__(self, reply: Reply, cancel: CancelToken, on_end: Callable[[str], None]) -> None:
        self.reply = reply
        self.cancel_token = cancel
        self._on_end = on_end
        self._loop = asyncio.get_running_loop()
        self._events: asyncio.Queue[object] = asyncio.Queue()

    def start(self) -> None:
        threading.Thread(target=self._pump, name=f"sharpen-{self.reply.engine}", daemon=True).start()

    def cancel(self) -> None:
        self.cancel_token.cancel()

    def _pump(self) -> None:
        outcome = "failed"
        try:
            for event in self.reply:
                self._send(event)
                if isinstance(event, Done):
                    outcome = "cancelled" if event.stats.finish_reason == "cancelled" else "served"
        except Exception as error:  # handed to the request's handler, which answers with it
            self._send(error)
        finally:
            self._send(_END)
            with contextlib.suppress(RuntimeError):  # the loop has closed: the server is stopping
                self._loop.call_soon_threadsafe(self._on_end, outcome)

    def _send(self, item: object) -> None:
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(self._events.put_nowait, item)

    async def next(self) -> Event | None:
        """The next event; None after the last; an exception the engine raised is raised here."""
        item = await self._events.get()
        if item is _END:
            return None
        if isinstance(item, BaseException):
            raise item
        assert isinstance(item, Event)
        return item


class DisconnectWatch:
    """Notices a client that closes its connection while its request waits or runs (the body already read).
    A streamed response stops it: sse-starlette listens for the disconnect itself."""

    def __init__(self, request: Request) -> None:
        self._request = request
        self.gone = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(self._listen())

    async def _listen(self) -> None:
        while True:
            message = await self._request.receive()
            if message["type"] == "http.disconnect":
                self.gone.set()
                return

    async def until(self, work: Awaitable[T]) -> T:
        """`work`'s result, or ClientGone if the client goes first (the work is then cancelled)."""
        task = asyncio.ensure_future(work)
        gone = asyncio.ensure_future(self.gone.wait())
        try:
            await asyncio.wait({task, gone}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            gone.cancel()
            if not task.done():  # the client went, or this handler was cancelled (the server is stopping)
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        if task.cancelled():
            raise ClientGone()
        return task.result()

    def stop(self) -> None:
        self._task.cancel()
