"""The server's parts on their own: deltas that are never taken back, stop strings, remote sources, the
catalogue's remote entries, and `sharpen serve` started as a user starts it."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest

from app.domain.draft_request import DraftRequest
from app.server.queueing import EngineQueue, QueueFull
from engines.cancel import CancelToken
from engines.stops import before_stops
from models.catalogue import CatalogueError, entry_from_table
from models.remote import BadRemoteSource, parse_remote

ROOT = Path(__file__).resolve().parents[2]


def test_text_that_a_stop_string_may_still_cut_is_held_back() -> None:
    assert before_stops("Dear Sam, see you", ["\n\n"]) == "Dear Sam, see you"
    assert before_stops("Dear Sam,\n", ["\n\n"]) == "Dear Sam,"
    assert before_stops("Dear Sam,\n\nBest", ["\n\n"]) == "Dear Sam,"
    assert before_stops("Best wishes, An", ["Ana", "Bob"]) == "Best wishes, "
    assert before_stops("anything", []) == "anything"


def test_a_conversation_is_the_history_then_the_prompt() -> None:
    system = {"role": "system", "content": "You write emails."}
    assert DraftRequest("draft", "Write to Sam").conversation() == "Write to Sam"
    assert DraftRequest("draft", "Write to Sam", history=(system,)).conversation() == [
        system,
        {"role": "user", "content": "Write to Sam"},
    ]


def test_a_child_cancel_token_follows_its_parent_but_not_the_other_way() -> None:
    parent = CancelToken()
    child = CancelToken(parent=parent)
    child.cancel()
    assert child.cancelled and child.cancelled_here and not parent.cancelled
    other = CancelToken(parent=parent)
    parent.cancel()
    assert other.cancelled and not other.cancelled_here


async def test_a_queue_admits_one_running_and_its_waiting_then_refuses() -> None:
    queue = EngineQueue("diffusion", waiting=1)
    queue.admit(lambda: 2.5)
    await queue.wait_turn()
    queue.admit(lambda: 2.5)
    with pytest.raises(QueueFull) as full:
        queue.admit(lambda: 2.5)
    # Two ahead of it, each estimated 2.5 s.
    assert full.value.retry_after_s == 5
    assert queue.as_json() | {} == {
        "running": True,
        "waiting": 1,
        "capacity": 2,
        "served": 0,
        "cancelled": 0,
        "refused": 1,
        "failed": 0,
    }
    queue.finish("served")
    await queue.wait_turn()
    queue.finish("cancelled")
    assert (queue.admitted, queue.counts.served, queue.counts.cancelled) == (0, 1, 1)


@pytest.mark.parametrize(
    ("source", "problem"),
    [
        ("openai:localhost:8080/v1#m", "write openai:http://HOST:PORT/v1#MODEL"),
        ("openai:http://127.0.0.1:8080/v1", "names no model: add #MODEL"),
        ("openai:ftp://host/v1#m", "an http or https URL"),
    ],
)
def test_a_malformed_remote_source_says_how_to_write_it(source: str, problem: str) -> None:
    with pytest.raises(BadRemoteSource, match=problem):
        parse_remote(source)


def test_a_remote_source_is_read() -> None:
    remote = parse_remote("openai:http://gpu-box:8080/v1/#qwen2.5-7b")
    assert (remote.base_url, remote.model) == ("http://gpu-box:8080/v1", "qwen2.5-7b")


def test_a_catalogue_entry_may_name_a_remote_ar_model_only() -> None:
    table = {"role": "complete", "engine": "openai-ar", "format": "openai-api", "source": "openai:http://h:1/v1#m"}
    assert entry_from_table("box", table, "config.toml", builtin=False).is_remote
    with pytest.raises(CatalogueError, match='role "complete" or "write", engine "openai-ar"'):
        entry_from_table("box", table | {"role": "draft"}, "config.toml", builtin=False)
    with pytest.raises(CatalogueError, match="names no model"):
        entry_from_table("box", table | {"source": "openai:http://h:1/v1"}, "config.toml", builtin=False)


def test_sharpen_serve_starts_and_answers(tmp_path: Path) -> None:
    """The command a user runs: it says where it listens, answers /v1/models, and Ctrl+C stops it cleanly."""
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "serve", "--port", str(port)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={"SHARPEN_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.strip() == f"sharpen: serving on http://127.0.0.1:{port}/v1 (OpenAI-compatible; Ctrl+C stops)"
        models = _get_when_up(f"http://127.0.0.1:{port}/v1/models")
        listed = [model["id"] for model in models["data"]]
        assert listed == ["sharpen", "smollm2-135m-instruct", "sharpen-write", "sharpen-draft"]
    finally:
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 0
    assert process.stderr is not None and "Traceback" not in process.stderr.read()


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _get_when_up(url: str) -> Any:
    import time

    deadline = time.monotonic() + 30
    while True:
        try:
            return httpx.get(url, timeout=5).json()
        except httpx.TransportError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def test_a_port_in_use_is_one_clear_line(capsys: pytest.CaptureFixture[str]) -> None:
    import socket

    from app.cli import main

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert main(["serve", "--port", str(port)]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err == [f"sharpen: error: port {port} on 127.0.0.1 is in use (another server?): choose another with --port"]
