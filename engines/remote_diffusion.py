"""A diffusion engine on another machine (models.draft = `sharpen:URL` or `openai:URL#MODEL`).

Against another `sharpen serve`, a draft is one POST to its /v1/sharpen/drafts: the `pass` events it streams
become the Pass events a local draft yields, and its `done` event (with the draft's trace) the Done, so the
editor animates, plays back and exports a remote draft as it does a local one. Against a plain
OpenAI-compatible dLLM server (SGLang, LMDeploy) a draft is one chat completion: text only, no passes.
Each kind also says how it stands (`status`): whether it answers, its round trip, and the remote Sharpen's
calibration, which the router estimates with.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx2 as httpx
import openai

from engines.cancel import NEVER_CANCELLED, CancelToken
from engines.errors import EngineBusy, EngineError, InvalidRequestError
from engines.events import DiffusionStats, Done, FinishReason, Pass
from engines.messages import ChatMessage
from engines.remote_draft import RemoteDraft
from models.remote import RemoteDraftSource

# How long a remote may take to accept a connection, and to answer the status call: a remote that does not
# answer holds up routing by at most this.
CONNECT_TIMEOUT_S = 3.0
STATUS_TIMEOUT_S = 5.0
# A draft's passes may be far apart on a busy remote (its stream pings every 15 s).
DRAFT_READ_TIMEOUT_S = 600.0
STATUS_PATH = "/v1/sharpen/status"
DRAFTS_PATH = "/v1/sharpen/drafts"
TEXT_ONLY_NOTE = "text only: an OpenAI-compatible server sends no refinement passes"


class RemoteUnavailable(EngineError):
    """The remote draft engine does not answer (refused, timed out, not a Sharpen): one line saying which."""


@dataclass(frozen=True)
class RemoteStatus:
    """How a remote draft engine stands, as one status call found it."""

    # The model that drafts there (the remote Sharpen's models.draft; "" where it has none).
    model: str
    # Whether it can draft now (a remote Sharpen with a draft model present; an OpenAI server listing the model).
    present: bool
    # The remote Sharpen's costs for its draft model (router.profile.DiffusionCosts' fields); None where it
    # reports none (an OpenAI-compatible server).
    costs: Mapping[str, Any] | None
    # Seconds the status call took, there and back.
    round_trip_s: float


def _unavailable(source: RemoteDraftSource, error: Exception) -> RemoteUnavailable:
    detail = str(error).strip() or type(error).__name__
    return RemoteUnavailable(f"the remote draft engine ({source.label}) does not answer: {detail}")


def _headers(api_key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_key}"}


def _refused(source: RemoteDraftSource, response: httpx.Response) -> EngineError:
    """An error answer in OpenAI's shape (what `sharpen serve` sends) as the engine error it stands for."""
    message = response.text.strip()[:300]
    try:
        body = json.loads(response.read() or b"{}")
        inner = body.get("error", body) if isinstance(body, dict) else {}
        message = str(inner.get("message", message)) if isinstance(inner, dict) else message
    except (json.JSONDecodeError, UnicodeDecodeError):
        pass
    status = response.status_code
    if status == 400:
        return InvalidRequestError(f"the remote draft engine ({source.label}) refused the request: {message}")
    if status in (429, 503):
        after = response.headers.get("retry-after", "")
        busy = f"the remote draft engine ({source.label}) is busy ({status}): {message}"
        return EngineBusy(busy, int(after) if after.isdigit() else None)
    if status == 401:
        return EngineError(
            f"the remote draft engine ({source.label}) wants an API key: set SHARPEN_REMOTE_API_KEY ({message})"
        )
    return EngineError(f"the remote draft engine ({source.label}) answered {status}: {message}")


def _cancelled(draft: RemoteDraft, passes: list[Pass], started: float) -> Done:
    """The end of a draft cancelled here: the remote stops when the stream closes; what settled is the text."""
    last = passes[-1] if passes else None
    text = draft.settled(last) if last is not None else ""
    stats = DiffusionStats(
        prompt_tokens=0,
        canvas_tokens=len(last.canvas) if last is not None else 0,
        generated_tokens=last.stable_prefix if last is not None else 0,
        passes=len(passes),
        total_s=time.perf_counter() - started,
        backend_s=0.0,
        finish_reason="cancelled",
    )
    return Done(text, stats)


def _sse(lines: Iterator[str]) -> Iterator[tuple[str, str]]:
    """(event, data) pairs of a server-sent event stream."""
    event, data = "message", []
    for line in lines:
        if line.startswith("event:"):
            event = line.removeprefix("event:").strip()
        elif line.startswith("data:"):
            data.append(line.removeprefix("data:").strip())
        elif not line and data:
            yield event, "\n".join(data)
            event, data = "message", []
    if data:
        yield event, "\n".join(data)


class SharpenRemote:
    """Another `sharpen serve` as this machine's diffusion engine."""

    def __init__(self, source: RemoteDraftSource, *, api_key: str) -> None:
        self.source = source
        self._api_key = api_key

    def status(self) -> RemoteStatus:
        """Its /v1/sharpen/status: its draft model and its calibration, and the round trip, measured."""
        started = time.perf_counter()
        try:
            response = httpx.get(
                self.source.base_url + STATUS_PATH,
                headers=_headers(self._api_key),
                timeout=httpx.Timeout(STATUS_TIMEOUT_S, connect=CONNECT_TIMEOUT_S),
            )
        except httpx.HTTPError as error:
            raise _unavailable(self.source, error) from None
        round_trip = time.perf_counter() - started
        if response.status_code != 200:
            raise _refused(self.source, response)
        try:
            draft = response.json()["draft"]
            return RemoteStatus(str(draft["model"]), bool(draft["present"]), draft.get("costs"), round_trip)
        except (json.JSONDecodeError, KeyError, TypeError):
            raise RemoteUnavailable(
                f"the remote draft engine ({self.source.label}) is not a Sharpen server that drafts "
                f"(its {STATUS_PATH} says nothing of a draft model)"
            ) from None

    def draft(
        self, body: Mapping[str, Any], model_name: str, cancel: CancelToken | None = None
    ) -> tuple[RemoteDraft, Iterator[Pass | Done]]:
        """One request body of /v1/sharpen/drafts: the draft (what it learns as it runs) and its events, which
        send the request when first read."""
        draft = RemoteDraft(self.source, model_name)
        return draft, self._events(draft, body, cancel)

    def _events(self, draft: RemoteDraft, body: Mapping[str, Any], cancel: CancelToken | None) -> Iterator[Pass | Done]:
        """The draft's passes as they arrive, then its Done; cancelling closes the stream (the remote stops)."""
        cancel = cancel or NEVER_CANCELLED
        started = time.perf_counter()
        passes: list[Pass] = []
        timeout = httpx.Timeout(DRAFT_READ_TIMEOUT_S, connect=CONNECT_TIMEOUT_S)
        try:
            with httpx.stream(
                "POST",
                self.source.base_url + DRAFTS_PATH,
                json=dict(body),
                headers=_headers(self._api_key),
                timeout=timeout,
            ) as response:
                if response.status_code != 200:
                    response.read()
                    raise _refused(self.source, response)
                for event, data in _sse(response.iter_lines()):
                    if cancel.cancelled:
                        yield _cancelled(draft, passes, started)
                        return
                    payload = json.loads(data)
                    if event == "pass":
                        passes.append(draft.pass_from(payload))
                        yield passes[-1]
                    elif event == "done":
                        yield draft.done_from(payload)
                        return
                    elif isinstance(payload, dict) and "error" in payload:
                        message = payload["error"].get("message", data) if isinstance(payload["error"], dict) else data
                        raise EngineError(f"the remote draft engine ({self.source.label}) failed: {message}")
        except httpx.HTTPError as error:
            raise _unavailable(self.source, error) from None
        if cancel.cancelled:
            yield _cancelled(draft, passes, started)
            return
        raise EngineError(f"the remote draft engine ({self.source.label}) ended the draft without its last event")


class OpenAIRemote:
    """An OpenAI-compatible dLLM server (SGLang, LMDeploy) as this machine's diffusion engine: text only."""

    def __init__(self, source: RemoteDraftSource, *, api_key: str) -> None:
        self.source = source
        self._client = openai.OpenAI(
            base_url=source.base_url, api_key=api_key, timeout=DRAFT_READ_TIMEOUT_S, max_retries=0
        )
        self._status_client = self._client.with_options(
            timeout=httpx.Timeout(STATUS_TIMEOUT_S, connect=CONNECT_TIMEOUT_S)
        )

    def status(self) -> RemoteStatus:
        """Whether it answers and lists the model, and the round trip of that call."""
        started = time.perf_counter()
        try:
            listed = [model.id for model in self._status_client.models.list()]
        except openai.APIStatusError as error:
            raise EngineError(f"the remote draft engine ({self.source.label}) answered {error.status_code}") from None
        except openai.APIError as error:
            raise _unavailable(self.source, error) from None
        return RemoteStatus(self.source.model, self.source.model in listed, None, time.perf_counter() - started)

    def events(
        self,
        messages: list[ChatMessage],
        max_tokens: int,
        sampling: Mapping[str, Any],
        stop: Sequence[str] = (),
        cancel: CancelToken | None = None,
    ) -> Iterator[Done]:
        """One chat completion, as a draft's Done: the text, with no passes to show."""
        started = time.perf_counter()
        chosen: dict[str, Any] = {
            key: value for key, value in sampling.items() if key in ("temperature", "top_p", "seed")
        }
        if stop:
            chosen["stop"] = list(stop)
        sent: Any = messages
        try:
            answer = self._client.chat.completions.create(
                model=self.source.model, messages=sent, max_tokens=max_tokens, **chosen
            )
        except openai.APIStatusError as error:
            raise EngineError(
                f"the remote draft engine ({self.source.label}) answered {error.status_code}: {error.message}"
            ) from None
        except openai.APIError as error:
            raise _unavailable(self.source, error) from None
        took = time.perf_counter() - started
        choice = answer.choices[0] if answer.choices else None
        text = (choice.message.content or "") if choice is not None else ""
        usage = answer.usage
        finish: FinishReason = "length" if choice is not None and choice.finish_reason == "length" else "eos"
        if cancel is not None and cancel.cancelled:
            finish = "cancelled"
        stats = DiffusionStats(
            prompt_tokens=usage.prompt_tokens if usage else 0,
            canvas_tokens=max_tokens,
            generated_tokens=usage.completion_tokens if usage else 0,
            passes=0,
            total_s=took,
            backend_s=took,
            finish_reason=finish,
            cache_note=TEXT_ONLY_NOTE,
        )
        yield Done(text, stats)
