"""The bodies OpenAI's API (and llama-server's /infill) answer with, built from a finished or running Reply."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from app.domain.reply import Reply
from engines.events import Done, GenerationStats, Pass

if TYPE_CHECKING:
    from app.server.requests import Call

_FINISH = {"eos": "stop", "stop": "stop", "length": "length", "cancelled": "stop"}


def finish_reason(done: Done) -> str:
    return _FINISH[done.stats.finish_reason]


def usage(done: Done) -> dict[str, int]:
    stats = done.stats
    prompt, generated = stats.prompt_tokens, stats.generated_tokens
    return {"prompt_tokens": prompt, "completion_tokens": generated, "total_tokens": prompt + generated}


def sharpen_field(reply: Reply, done: Done | None = None) -> dict[str, Any]:
    """Who served the request and why; once it is done, its stats and a diffusion draft's settings."""
    payload: dict[str, Any] = {"route": reply.route.as_json(), "engine": reply.engine, "model": reply.model}
    if done is not None:
        payload |= {key: value for key, value in reply.as_json().items() if key != "text"}
    return payload


def route_headers(reply: Reply) -> dict[str, str]:
    """The route in response headers (latin-1 only: anything else is escaped)."""

    def plain(text: str) -> str:
        return text.encode("ascii", "backslashreplace").decode("ascii")

    return {
        "X-Sharpen-Engine": reply.engine,
        "X-Sharpen-Model": plain(reply.route.model),
        "X-Sharpen-Reason": plain(reply.route.reason),
    }


class Shape:
    """One answer's id, creation time and model, shared by its body and every chunk."""

    def __init__(self, prefix: str, call: Call) -> None:
        self.id = f"{prefix}-{call.id}"
        self.created = call.created
        self.reply = call.reply

    def _head(self, kind: str) -> dict[str, Any]:
        return {"id": self.id, "object": kind, "created": self.created, "model": self.reply.model}

    # ----- /v1/chat/completions -----------------------------------------------------------------

    def chat(self, done: Done) -> dict[str, Any]:
        message = {"role": "assistant", "content": done.text}
        choice = {"index": 0, "message": message, "finish_reason": finish_reason(done), "logprobs": None}
        return self._head("chat.completion") | {
            "choices": [choice],
            "usage": usage(done),
            "sharpen": sharpen_field(self.reply, done),
        }

    def chat_chunk(self, delta: dict[str, str], finish: str | None = None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}
        return self._head("chat.completion.chunk") | {"choices": [choice]}

    def chat_usage_chunk(self, done: Done) -> dict[str, Any]:
        return self._head("chat.completion.chunk") | {
            "choices": [],
            "usage": usage(done),
            "sharpen": sharpen_field(self.reply, done),
        }

    # ----- /v1/completions ----------------------------------------------------------------------

    def completion(self, done: Done) -> dict[str, Any]:
        choice = {"index": 0, "text": done.text, "finish_reason": finish_reason(done), "logprobs": None}
        return self._head("text_completion") | {
            "choices": [choice],
            "usage": usage(done),
            "sharpen": sharpen_field(self.reply, done),
        }

    def completion_chunk(self, text: str, finish: str | None = None) -> dict[str, Any]:
        choice = {"index": 0, "text": text, "finish_reason": finish, "logprobs": None}
        return self._head("text_completion") | {"choices": [choice]}

    def completion_usage_chunk(self, done: Done) -> dict[str, Any]:
        return self._head("text_completion") | {
            "choices": [],
            "usage": usage(done),
            "sharpen": sharpen_field(self.reply, done),
        }


def infill_body(reply: Reply, done: Done, *, warm_up: bool = False) -> dict[str, Any]:
    """llama-server's /infill answer (what llama.vim and llama.vscode read); a warm-up's is empty."""
    stats = done.stats
    predicted = 0 if warm_up else stats.generated_tokens
    stop_type = {"eos": "eos", "stop": "word", "length": "limit", "cancelled": "none"}[stats.finish_reason]
    reused = stats.reused_tokens if isinstance(stats, GenerationStats) else 0
    trimmed = stats.trimmed_tokens if isinstance(stats, GenerationStats) else 0
    first_s = stats.time_to_first_token_s if isinstance(stats, GenerationStats) else None
    prompt_ms = (first_s or 0.0) * 1000
    predicted_ms = stats.total_s * 1000 - prompt_ms
    timings = {
        "prompt_n": stats.prompt_tokens - reused,
        "prompt_ms": round(prompt_ms, 3),
        "predicted_n": predicted,
        "predicted_ms": round(predicted_ms, 3),
        "predicted_per_second": round(predicted * 1000 / predicted_ms, 3) if predicted_ms > 0 else 0.0,
    }
    return {
        "content": "" if warm_up else done.text,
        "stop": True,
        "stop_type": stop_type,
        "model": reply.model,
        "tokens_predicted": predicted,
        "tokens_evaluated": stats.prompt_tokens,
        "tokens_cached": reused,
        "truncated": trimmed > 0,
        "timings": timings,
        "sharpen": sharpen_field(reply, done),
    }


def only_fields(body: dict[str, Any], fields: tuple[str, ...]) -> dict[str, Any]:
    """llama-server's `response_fields`: the keys asked for, a nested one ("timings/prompt_n") under its path;
    a field the answer does not have is left out."""
    chosen: dict[str, Any] = {}
    for name in fields:
        value: Any = body
        for key in name.split("/"):
            if not isinstance(value, dict) or key not in value:
                break
            value = value[key]
        else:
            chosen[name] = value
    return chosen


def pass_body(reply: Reply, event: Pass) -> dict[str, Any]:
    """One refinement pass, for clients that draw the canvas."""
    return {
        "index": event.index,
        "canvas": list(event.canvas),
        "pieces": list(event.pieces),
        "masked": list(event.masked),
        "committed": list(event.committed),
        "confidences": [round(c, 6) for c in event.confidences],
        "stable_prefix": event.stable_prefix,
        "settled_text": reply.settled_text(event),
        "window": list(event.window),
        "elapsed_ms": round(event.elapsed_s * 1000, 3),
        "planned_passes": event.planned_passes,
    }
