"""Drafting on another machine: a real `sharpen serve` on loopback (the "GPU box", on the tiny diffusion GGUF)
as this machine's diffusion engine (models.draft = sharpen:URL), through the CLI; the box stopped, drafts go to
this machine's AR engine and say why; and a plain OpenAI-compatible dLLM stand-in (text only)."""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from app.cli import main
from app.domain.draft_request import DraftRequest
from app.server.app import ServerOptions
from app.server.threaded import running_server
from app.service import SharpenService
from app.storage.config import Config, ModelsSection, RouterSection
from app.storage.paths import SharpenPaths, sharpen_paths
from engines.cancel import CancelToken
from engines.events import Done, Event, Pass
from engines.remote_diffusion import TEXT_ONLY_NOTE
from engines.trace import Trace, load_trace

DRAFT = ["draft", "Write a note to Sam about Friday.", "--tokens", "32", "--steps", "8", "--engine", "diffusion"]


def gpu_box_service(draft_model: Path, home: Path) -> SharpenService:
    """The other machine's Sharpen: the tiny diffusion GGUF for drafts, its own config and data."""
    config = dataclasses.replace(
        Config(),
        models=ModelsSection(draft=str(draft_model)),
        router=RouterSection(auto_calibrate=False),
    )
    return SharpenService(config, SharpenPaths.under(home))


@pytest.fixture
def gpu_box(tiny_cacheable_path: Path, tmp_path: Path) -> Iterator[str]:
    with running_server(gpu_box_service(tiny_cacheable_path, tmp_path / "gpu-box")) as url:
        yield url


def use_for_drafts(source: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "set", "models.draft", source]) == 0
    assert main(["config", "set", "router.auto_calibrate", "false"]) == 0
    capsys.readouterr()


def draft_with_trace(path: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[dict[str, Any], str]:
    assert main([*DRAFT, "--json", "--trace", str(path), *extra]) == 0
    out, err = capsys.readouterr()
    return json.loads(out), err


def same_shape(remote: Trace, local: Trace) -> None:
    assert remote.engine == local.engine == "diffusion"
    assert remote.header.canvas_length == local.header.canvas_length
    assert remote.header.mask_token_id == local.header.mask_token_id
    assert remote.header.settings == local.header.settings
    assert remote.header.prompt == local.header.prompt and remote.header.kind == local.header.kind
    assert len(remote.passes) == len(local.passes) == 8
    # The same tiny model, greedy, with the same settings: the same refinement, pass for pass.
    for theirs, ours in zip(remote.passes, local.passes, strict=True):
        assert (theirs.canvas, theirs.pieces, theirs.masked) == (ours.canvas, ours.pieces, ours.masked)
        assert (theirs.committed, theirs.stable_prefix, theirs.window) == (
            ours.committed,
            ours.stable_prefix,
            ours.window,
        )
    assert remote.text == local.text and type(remote.stats) is type(local.stats)


def test_a_cli_draft_on_another_sharpen_streams_its_passes_and_keeps_the_same_trace(
    gpu_box: str, tiny_cacheable_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    use_for_drafts(str(tiny_cacheable_path), capsys)
    local, _ = draft_with_trace(tmp_path / "local.jsonl", capsys)

    use_for_drafts(f"sharpen:{gpu_box}", capsys)
    remote, _ = draft_with_trace(tmp_path / "remote.jsonl", capsys)
    assert remote["engine"] == "diffusion" and gpu_box in remote["model"]
    assert remote["passes"] == 8 and remote["text"] == local["text"]
    assert remote["settings"] == local["settings"]
    same_shape(load_trace(tmp_path / "remote.jsonl"), load_trace(tmp_path / "local.jsonl"))

    # --stream prints the settled text as each pass arrives from the other machine.
    assert main([*DRAFT, "--stream"]) == 0
    assert capsys.readouterr().out == remote["text"] + "\n"

    # The route estimates the remote's drafts with its own calibration, plus the round trip measured from here.
    assert main(["route", "--kind", "draft", "--tokens", "64", "--json"]) == 0
    route = json.loads(capsys.readouterr().out)
    assert "round trip" in route["estimates"]["diffusion"]["detail"]


def test_the_status_reports_the_draft_model_and_its_costs(gpu_box: str, tiny_cacheable_path: Path) -> None:
    import httpx2 as httpx

    status = httpx.get(f"{gpu_box}/v1/sharpen/status", timeout=30).json()
    draft = status["draft"]
    assert draft["model"] == tiny_cacheable_path.name and draft["present"] is True
    assert draft["costs"]["pass_base_s"] > 0 and draft["costs"]["model"] == tiny_cacheable_path.name
    assert set(status["engines"]) == {"ar", "diffusion"}


def test_a_stopped_remote_is_one_line_and_drafts_go_to_this_machine(
    tiny_cacheable_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with running_server(gpu_box_service(tiny_cacheable_path, tmp_path / "gpu-box")) as url:
        use_for_drafts(f"sharpen:{url}", capsys)
        assert main([*DRAFT, "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["engine"] == "diffusion"
    assert main(DRAFT) == 0  # asked of diffusion: the remote is gone, so AR here writes it
    out, err = capsys.readouterr()
    assert out.strip()
    (said,) = [line for line in err.splitlines() if "does not answer" in line]
    assert said.startswith(f"sharpen: AR: the remote draft engine (sharpen serve at {url}) does not answer")
    assert said.endswith("AR on this machine drafts instead")


def test_an_api_key_is_sent_as_for_a_remote_ar_model(
    tiny_cacheable_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    service = gpu_box_service(tiny_cacheable_path, tmp_path / "gpu-box")
    with running_server(service, ServerOptions(api_key="s3cret")) as url:
        use_for_drafts(f"sharpen:{url}", capsys)
        assert main(DRAFT) == 0
        err = capsys.readouterr().err
        assert "sharpen: AR: " in err and "set SHARPEN_REMOTE_API_KEY" in err
        monkeypatch.setenv("SHARPEN_REMOTE_API_KEY", "s3cret")
        assert main([*DRAFT, "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["engine"] == "diffusion"


class _DllmServer(BaseHTTPRequestHandler):
    """A plain OpenAI-compatible dLLM server (as SGLang serves one): lists its model, answers chat whole."""

    asked: list[dict[str, Any]] = []

    def log_message(self, *_args: Any) -> None:
        pass

    def _answer(self, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self._answer({"object": "list", "data": [{"id": "llada2-mini", "object": "model", "owned_by": "sglang"}]})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.asked.append(body)
        message = {"role": "assistant", "content": "Friday is off, Sam."}
        choice = {"index": 0, "message": message, "finish_reason": "stop"}
        usage = {"prompt_tokens": 20, "completion_tokens": 6, "total_tokens": 26}
        self._answer(
            {
                "id": "x",
                "object": "chat.completion",
                "created": 0,
                "model": "llada2-mini",
                "choices": [choice],
                "usage": usage,
            }
        )


@pytest.fixture
def dllm_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _DllmServer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        thread.join()


def test_a_plain_openai_dllm_server_drafts_text_only(
    dllm_server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    use_for_drafts(f"openai:{dllm_server}#llada2-mini", capsys)
    _DllmServer.asked.clear()
    trace = tmp_path / "t.jsonl"
    assert main([*DRAFT, "--json", "--trace", str(trace)]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["engine"] == "diffusion" and payload["text"] == "Friday is off, Sam."
    assert payload["passes"] == 0 and payload["cache_note"] == TEXT_ONLY_NOTE
    assert not trace.exists(), "a text-only draft has no passes to keep"
    asked = _DllmServer.asked[0]
    assert asked["model"] == "llada2-mini" and asked["max_tokens"] == 32
    assert asked["messages"][-1]["content"] == "Write a note to Sam about Friday."

    assert main(DRAFT) == 0
    err = capsys.readouterr().err
    assert "sends text only: nothing animates" in err and f"sharpen: note: {TEXT_ONLY_NOTE}" in err

    # Estimated from what its drafts took, plus the round trip.
    assert main(["route", "--kind", "draft", "--tokens", "64", "--json"]) == 0
    detail = json.loads(capsys.readouterr().out)["estimates"]["diffusion"]["detail"]
    assert detail.startswith("64 tokens x") and "as its drafts ran" in detail and "round trip" in detail


def test_cancelling_a_remote_draft_stops_it_there(gpu_box: str) -> None:
    config = dataclasses.replace(
        Config(), models=ModelsSection(draft=f"sharpen:{gpu_box}"), router=RouterSection(auto_calibrate=False)
    )
    service = SharpenService(config, sharpen_paths())
    cancel = CancelToken()
    request = DraftRequest("draft", "Write a long story.", tokens=256, engine="diffusion", overrides={"steps": 256})
    reply = service.draft(request, cancel=cancel)
    events: list[Event] = []
    for event in reply:
        events.append(event)
        if isinstance(event, Pass):
            cancel.cancel()
    done = events[-1]
    assert isinstance(done, Done) and done.stats.finish_reason == "cancelled"
    passes = [event for event in events if isinstance(event, Pass)]
    assert 1 <= len(passes) < 256 and done.text == reply.settled_text(passes[-1])
    trace = reply.trace()
    assert trace is not None and trace.passes == passes, "a cancelled remote draft keeps the passes that came"
