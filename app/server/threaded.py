"""Sharpen's server on uvicorn in a thread of this process, on a free loopback port: for tests, benchmarks and
programs that embed Sharpen."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import uvicorn

from app.server.app import ServerOptions, build_app
from app.service import SharpenService


@contextmanager
def running_server(service: SharpenService, options: ServerOptions | None = None) -> Iterator[str]:
    """Serve on a free loopback port; yields the base URL (http://127.0.0.1:PORT)."""
    config = uvicorn.Config(build_app(service, options), host="127.0.0.1", port=0, log_level="warning")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the server did not start")
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
