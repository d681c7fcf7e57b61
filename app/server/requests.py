"""Request bodies checked and turned into the service's calls: each endpoint makes the call the TUI and the
CLI make for the same intent, and gets a Reply back."""

from __future__ import annotations

import functools
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from app.domain.draft_request import DraftRequest
from app.domain.option_engines import pinned
from app.domain.reply import Reply
from app.server.errors import ApiError, bad_request, invalid_unicode
from app.service import SharpenService
from app.storage.config import BadValue, check_value, settings_registry
from app.storage.documents import SURROGATE
from engines.cancel import CancelToken
from engines.diffusion.settings import DiffusionSettings
from engines.options import options
from router.request import ENGINES, POLICIES, QUALITIES, EngineName

# The model id that leaves the choice to the router (listed by /v1/models beside the configured models).
ROUTED = "sharpen"
# OpenAI's limit, which clients expect.
MAX_STOPS = 4
DRAFT_OPTIONS = frozenset(item.name for item in options(DiffusionSettings))
ROUTING_OPTIONS = {"engine": ENGINES, "policy": POLICIES, "quality": QUALITIES}
# OpenAI's own fields for draft options (a `sharpen` field may give them too).
SAMPLING = ("temperature", "top_p", "seed")
# The draft options a body has no field for: the chat template is always used, and a draft's trace comes
# with /v1/sharpen/drafts.
NO_FIELD = frozenset({"chat", "record_trace"})


@dataclass
class Call:
    """A request ready to run: its reply, its own cancel token, and how the answer is to be sent."""

    reply: Reply
    cancel: CancelToken
    stream: bool = False
    include_usage: bool = False
    stop: tuple[str, ...] = ()
    # llama.vim's `n_predict: 0`: evaluate the prompt so that the AR engine's cache holds it, answer nothing.
    warm_up: bool = False
    # llama-server's `response_fields`: only these keys of the answer, a path such as "timings/prompt_n"
    # brought up to the top under that name (None: the whole answer).
    fields: tuple[str, ...] | None = None
    # What the answer's body and every chunk of it are stamped with.
    id: str = field(default_factory=lambda: secrets.token_hex(12))
    created: int = field(default_factory=lambda: int(time.time()))


def check_unicode(body: Any) -> None:
    """Every string of a JSON body (keys too, at any depth) must be valid Unicode: JSON lets a lone
    surrogate through ("\\ud800"), which no tokenizer, and no UTF-8 answer, can take. A 400 names the first,
    by its path in the body (`messages[0].content`)."""
    waiting: list[tuple[str, Any]] = [("", body)]
    while waiting:  # depth first, in the body's order; a loop, as a body can nest deeper than Python recurses
        where, value = waiting.pop()
        if isinstance(value, str):
            found = SURROGATE.search(value)
            if found is not None:
                raise invalid_unicode(where or "the body", found.start(), where or None)
        elif isinstance(value, dict):
            for key in value:
                found = SURROGATE.search(key)
                if found is not None:
                    raise invalid_unicode(f"a key of {where or 'the body'}", found.start(), where or None)
            waiting.extend((f"{where}.{key}" if where else key, item) for key, item in reversed(value.items()))
        elif isinstance(value, list):
            waiting.extend((f"{where}[{number}]", item) for number, item in reversed(list(enumerate(value))))


def _get(body: Mapping[str, Any], key: str, kind: type | tuple[type, ...], default: Any = None) -> Any:
    value = body.get(key, default)
    if value is None:
        return default
    if not isinstance(value, kind) or (isinstance(value, bool) and kind in (int, float, (int, float))):
        names = " or ".join(k.__name__ for k in (kind if isinstance(kind, tuple) else (kind,)))
        raise bad_request(f"{key} must be {names}, got {value!r}", param=key)
    return value


def _tokens(body: Mapping[str, Any], keys: tuple[str, ...], default: int) -> int:
    for key in keys:
        value = _get(body, key, int)
        if value is not None:
            if value < 1:
                raise bad_request(f"{key} must be at least 1, got {value}", param=key)
            return int(value)
    return default


def _stops(body: Mapping[str, Any], limit: int | None = MAX_STOPS) -> tuple[str, ...]:
    value = body.get("stop")
    if value is None:
        return ()
    stops = [value] if isinstance(value, str) else value
    if not isinstance(stops, list) or not all(isinstance(s, str) for s in stops):
        raise bad_request("stop must be a string or a list of strings", param="stop")
    if limit is not None and len(stops) > limit:
        raise bad_request(f"stop takes up to {limit} strings, got {len(stops)}", param="stop")
    return tuple(s for s in stops if s)


def _single_choice(body: Mapping[str, Any]) -> None:
    if _get(body, "n", int, 1) != 1:
        raise bad_request("n must be 1: Sharpen writes one choice per request", param="n")


def field_name(option: str, engine_from: str = "sharpen.engine") -> str:
    """A draft option as a request body names it ("" for none); `engine_from` is what asked for the engine."""
    if option == "engine":
        return engine_from
    if option in NO_FIELD:
        return ""
    if option == "tokens":
        return "max_tokens"
    return option if option in SAMPLING else f"sharpen.{option}"


def _sampling(body: Mapping[str, Any]) -> dict[str, Any]:
    """OpenAI's sampling fields as draft options (the names are DiffusionSettings' own)."""
    chosen: dict[str, Any] = {}
    for key in SAMPLING:
        if body.get(key) is not None:
            chosen[key] = _checked_option(key, body[key], key)
    return chosen


def _checked_option(name: str, value: Any, param: str) -> Any:
    try:
        return check_value(settings_registry()[f"diffusion.{name}"], value)
    except BadValue as error:
        raise bad_request(f"{param} {error}", param=param) from None


@dataclass(frozen=True)
class SharpenOptions:
    """The body's `sharpen` field: the engine, policy and quality to route with, and draft options."""

    engine: EngineName | None = None
    policy: Any = None
    quality: Any = None
    overrides: dict[str, Any] = field(default_factory=dict)
    # What asked for the engine ("sharpen.engine", the model), as the messages about the options name it.
    engine_from: str = "sharpen.engine"

    @property
    def spelling(self) -> Callable[[str], str]:
        return functools.partial(field_name, engine_from=self.engine_from)


def _sharpen_options(body: Mapping[str, Any], engine: EngineName | None, engine_from: str = "") -> SharpenOptions:
    """The body's `sharpen` field; `engine` is what the request asks for otherwise (its model), and
    `engine_from` names that."""
    extra = _get(body, "sharpen", dict, {})
    unknown = sorted(set(extra) - DRAFT_OPTIONS - set(ROUTING_OPTIONS))
    if unknown:
        known = ", ".join(sorted(DRAFT_OPTIONS | set(ROUTING_OPTIONS)))
        raise bad_request(f"sharpen has unknown options {unknown}; known: {known}", param="sharpen")
    for key, choices in ROUTING_OPTIONS.items():
        if extra.get(key) is not None and extra[key] not in choices:
            raise bad_request(f"sharpen.{key} must be one of {', '.join(choices)}", param=f"sharpen.{key}")
    overrides = {
        name: _checked_option(name, value, f"sharpen.{name}")
        for name, value in extra.items()
        if name in DRAFT_OPTIONS and value is not None
    }
    if extra.get("engine"):
        engine, engine_from = extra["engine"], "sharpen.engine"
    return SharpenOptions(engine, extra.get("policy"), extra.get("quality"), overrides, engine_from)


def _model_engine(service: SharpenService, body: Mapping[str, Any]) -> tuple[EngineName | None, str]:
    """The engine the body's model asks for (None to route), and the model as messages name it."""
    return engine_for_model(service, body.get("model")), f"model {body.get('model')!r}"


def engine_for_model(service: SharpenService, model: Any) -> EngineName | None:
    """The engine a request's `model` asks for: None to route ("sharpen", or none given)."""
    if model is None or model == ROUTED or model == "":
        return None
    if not isinstance(model, str):
        raise bad_request("model must be a string", param="model")
    configured = service.config.models
    if model == configured.complete:
        return "ar"
    if model == configured.draft and model.strip():
        return "diffusion"
    names = ", ".join(name for name in (ROUTED, configured.complete, configured.draft) if name)
    raise ApiError(404, f"no model {model!r} here; the models are {names}", code="model_not_found", param="model")


def _content(message: Mapping[str, Any], where: str) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
                raise bad_request(f"{where}.content: only text parts are supported", param="messages")
            texts.append(part["text"])
        return "".join(texts)
    raise bad_request(f"{where}.content must be a string or a list of text parts", param="messages")


def _messages(body: Mapping[str, Any]) -> list[dict[str, str]]:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise bad_request("messages must be a non-empty list of {role, content}", param="messages")
    turns = []
    for number, message in enumerate(messages):
        where = f"messages[{number}]"
        if not isinstance(message, dict) or message.get("role") not in ("system", "developer", "user", "assistant"):
            raise bad_request(f"{where} needs a role of system, user or assistant", param="messages")
        role = "system" if message["role"] == "developer" else message["role"]
        turns.append({"role": role, "content": _content(message, where)})
    if turns[-1]["role"] != "user":
        raise bad_request("the last message must be the user's: it is what the reply answers", param="messages")
    return turns


def _stream_options(body: Mapping[str, Any]) -> tuple[bool, bool]:
    stream = bool(_get(body, "stream", bool, False))
    options = _get(body, "stream_options", dict, {})
    return stream, bool(options.get("include_usage", False))


def chat_call(service: SharpenService, body: Mapping[str, Any]) -> Call:
    """/v1/chat/completions. One instruction (after any system message) is a draft, routed by its length as
    the editor's Ctrl+D is; a conversation with earlier replies is a chat turn, which AR answers."""
    check_unicode(body)
    for unsupported in ("tools", "functions", "response_format"):
        if body.get(unsupported):
            raise bad_request(f"{unsupported} is not supported by Sharpen's models", param=unsupported)
    _single_choice(body)
    turns = _messages(body)
    stream, include_usage = _stream_options(body)
    chosen = _sharpen_options(body, *_model_engine(service, body))
    tokens = _tokens(body, ("max_completion_tokens", "max_tokens"), service.config.chat.max_tokens)
    stop = _stops(body)
    sampling = _sampling(body)
    cancel = CancelToken()
    request = DraftRequest(
        "draft",
        turns[-1]["content"],
        tokens=tokens,
        overrides=sampling | chosen.overrides,
        engine=chosen.engine,
        policy=chosen.policy,
        quality=chosen.quality,
        history=tuple(turns[:-1]),
        stop=stop,
        spelling=chosen.spelling,
    )
    conversation = any(turn["role"] == "assistant" for turn in turns)
    # A draft option only diffusion reads makes even a conversation a diffusion draft of it.
    if conversation and pinned(request).engine != "diffusion":
        reply = service.chat(turns, max_tokens=tokens, stop=stop, cancel=cancel, **sampling)
    else:
        reply = service.draft(request, cancel=cancel)
    return Call(reply, cancel, stream, include_usage, stop)


def completion_call(service: SharpenService, body: Mapping[str, Any]) -> Call:
    """/v1/completions: a continuation (AR), or with `suffix` the gap between prompt and suffix, routed as a
    rewrite is (AR fill-in-the-middle where the model has it, diffusion infill otherwise)."""
    check_unicode(body)
    if body.get("echo"):
        raise bad_request("echo is not supported", param="echo")
    _single_choice(body)
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1:
        prompt = prompt[0]
    if not isinstance(prompt, str):
        raise bad_request("prompt must be a string (one prompt per request)", param="prompt")
    suffix = _get(body, "suffix", str, "")
    stream, include_usage = _stream_options(body)
    chosen = _sharpen_options(body, *_model_engine(service, body))
    # OpenAI's default for completions.
    tokens = _tokens(body, ("max_tokens",), 16)
    stop = _stops(body)
    sampling = _sampling(body)
    cancel = CancelToken()
    request = DraftRequest(
        "infill",
        before=prompt,
        after=suffix,
        tokens=tokens,
        overrides=sampling | chosen.overrides,
        engine=chosen.engine,
        policy=chosen.policy,
        quality=chosen.quality,
        stop=stop,
        spelling=chosen.spelling,
    )
    # A draft option only diffusion reads makes even a plain continuation a diffusion draft of it.
    if not suffix and pinned(request).engine != "diffusion":
        reply = service.complete(prompt, max_tokens=tokens, stop=stop, cancel=cancel, trim="error", **sampling)
    else:
        reply = service.draft(request, cancel=cancel)
    return Call(reply, cancel, stream, include_usage, stop)


def infill_call(service: SharpenService, body: Mapping[str, Any]) -> Call:
    """llama-server's /infill: `input_prefix` + `prompt` before the cursor, `input_suffix` after it, and
    `input_extra` chunks of other files as context in front. `n_predict: 0` (llama.vim's warm-up when its
    extra context changes) evaluates the prompt on the AR engine and answers no text."""
    check_unicode(body)
    extra = body.get("input_extra") or []
    if not isinstance(extra, list) or not all(isinstance(c, dict) and isinstance(c.get("text"), str) for c in extra):
        raise bad_request("input_extra must be a list of {filename, text}", param="input_extra")
    before = "".join(chunk["text"] for chunk in extra)
    before += _get(body, "input_prefix", str, "") + _get(body, "prompt", str, "")
    after = _get(body, "input_suffix", str, "")
    n_predict = _get(body, "n_predict", int, -1)
    warm_up = n_predict == 0
    tokens = 1 if warm_up else n_predict if n_predict > 0 else service.config.complete.max_tokens
    stop = _stops(body, limit=None)  # llama-server takes any number
    fields = body.get("response_fields")
    if fields is not None and (not isinstance(fields, list) or not all(isinstance(f, str) for f in fields)):
        raise bad_request("response_fields must be a list of strings", param="response_fields")
    chosen = _sharpen_options(body, "ar" if warm_up else None, "n_predict 0 (a warm-up of the AR engine)")
    cancel = CancelToken()
    request = DraftRequest(
        "infill",
        before=before,
        after=after,
        tokens=tokens,
        overrides=_sampling(body) | chosen.overrides,
        engine=chosen.engine,
        policy=chosen.policy,
        quality=chosen.quality,
        stop=stop,
        spelling=chosen.spelling,
    )
    stream = bool(_get(body, "stream", bool, False)) and not warm_up
    chosen_fields = tuple(fields) if fields is not None else None
    return Call(service.draft(request, cancel=cancel), cancel, stream, False, stop, warm_up, chosen_fields)


def draft_call(service: SharpenService, body: Mapping[str, Any]) -> Call:
    """/v1/sharpen/drafts: a diffusion draft (`prompt` or `messages`, written between `before` and `after` where
    they are given: the document around the cursor) or a rewrite (`before` and `after` alone, with the
    `selection` and its `instruction`) whose every pass is streamed."""
    check_unicode(body)
    options = dict(_get(body, "sharpen", dict, {}))
    options.setdefault("engine", "diffusion")
    if options["engine"] != "diffusion":
        raise bad_request("the pass stream is a diffusion draft's: sharpen.engine must be diffusion", param="sharpen")
    chosen = _sharpen_options({"sharpen": options}, None)
    tokens = _tokens(body, ("max_tokens",), service.config.diffusion.tokens)
    stop = _stops(body)
    common: dict[str, Any] = {
        "tokens": tokens,
        "overrides": _sampling(body) | chosen.overrides,
        "engine": "diffusion",
        "policy": chosen.policy,
        "quality": chosen.quality,
        "stop": stop,
        "spelling": chosen.spelling,
    }
    document = {"before": _get(body, "before", str, ""), "after": _get(body, "after", str, "")}
    if "messages" in body:
        turns = _messages(body)
        request = DraftRequest("draft", turns[-1]["content"], history=tuple(turns[:-1]), **document, **common)
    elif "prompt" in body:
        request = DraftRequest("draft", _get(body, "prompt", str, ""), **document, **common)
    elif "before" in body or "after" in body:
        if _get(body, "instruction", str, "").strip() and not _get(body, "selection", str, "").strip():
            raise bad_request("an instruction rewrites a text: give it as selection", param="selection")
        request = DraftRequest(
            "infill",
            _get(body, "instruction", str, ""),
            before=_get(body, "before", str, ""),
            after=_get(body, "after", str, ""),
            selection=_get(body, "selection", str, ""),
            **common,
        )
    else:
        raise bad_request("give prompt, messages, or before and after", param="prompt")
    cancel = CancelToken()
    return Call(service.draft(request, cancel=cancel), cancel, True, False, stop)
