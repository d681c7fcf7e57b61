"""`sharpen serve` with the real `openai` client (and plain HTTP for llama-server's /infill and the pass
stream) against a real uvicorn server on loopback, serving the embedded models through llama.cpp."""

from __future__ import annotations

import itertools
import json
import math
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2 as httpx
import openai
import pytest

from app.domain.draft_request import DraftRequest
from app.server.app import ServerOptions
from app.server.errors import api_error_for
from app.server.threaded import running_server
from app.service import SharpenService
from app.storage.config import ChatSection, Config, ModelsSection
from app.storage.paths import SharpenPaths
from engines.errors import EngineBusy, EngineError
from router.cost import estimate_ar
from router.cost_measurement import QUICK

INSTRUCTION = "Write a short email to Sam declining the Friday meeting politely."
# Forces the diffusion engine through the `sharpen` extension field of a request body.
DIFFUSION = {"sharpen": {"engine": "diffusion"}}


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> SharpenService:
    """The embedded models (SmolLM2 for AR, sharpen-draft for diffusion), loaded once for the module."""
    return SharpenService(Config(), SharpenPaths.under(tmp_path_factory.mktemp("served")))


@pytest.fixture(scope="module")
def base_url(service: SharpenService) -> Iterator[str]:
    with running_server(service) as url:
        yield url


def client(base_url: str, key: str = "none") -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{base_url}/v1", api_key=key, max_retries=0, timeout=120)


def sharpen_of(response: Any) -> dict[str, Any]:
    """The `sharpen` field Sharpen adds to OpenAI's response bodies (and to /v1/models entries)."""
    extra = response.model_extra
    assert extra is not None and "sharpen" in extra
    found: dict[str, Any] = extra["sharpen"]
    return found


def sse_events(response: httpx.Response) -> Iterator[tuple[str, str]]:
    """(event, data) pairs of a server-sent event stream."""
    event, data = "message", []
    for line in response.iter_lines():
        if line.startswith("event:"):
            event = line.removeprefix("event:").strip()
        elif line.startswith("data:"):
            data.append(line.removeprefix("data:").strip())
        elif not line and data:
            yield event, "\n".join(data)
            event, data = "message", []


def test_models_lists_the_router_and_the_configured_models(base_url: str) -> None:
    listed = {model.id: sharpen_of(model) for model in client(base_url).models.list()}
    assert listed == {
        "sharpen": {"role": "router", "engine": None, "present": True},
        "smollm2-135m-instruct": {"role": "complete", "engine": "ar", "present": True},
        "sharpen-write": {"role": "write", "engine": "ar", "present": True},
        "sharpen-draft": {"role": "draft", "engine": "diffusion", "present": True},
    }


def test_a_short_chat_is_routed_to_ar_and_says_why(base_url: str, service: SharpenService) -> None:
    raw = client(base_url).chat.completions.with_raw_response.create(
        model="sharpen", messages=[{"role": "user", "content": INSTRUCTION}], max_tokens=12
    )
    reply = raw.parse()
    assert raw.headers["x-sharpen-engine"] == "ar"
    assert "short" in raw.headers["x-sharpen-reason"]
    sharpen = sharpen_of(reply)
    assert sharpen["route"]["engine"] == "ar" and sharpen["route"]["reason"] == raw.headers["x-sharpen-reason"]
    expected = service.draft(DraftRequest("draft", INSTRUCTION, tokens=12)).text()
    assert reply.choices[0].message.content == expected
    assert reply.choices[0].finish_reason == "length"
    assert reply.usage is not None and reply.usage.completion_tokens == 12


def test_a_streamed_diffusion_draft_arrives_as_a_growing_stable_prefix(base_url: str) -> None:
    chat = client(base_url).chat.completions
    messages: Any = [{"role": "system", "content": "You write emails."}, {"role": "user", "content": INSTRUCTION}]
    final = chat.create(model="sharpen", messages=messages, max_tokens=64, extra_body=DIFFUSION)
    assert sharpen_of(final)["engine"] == "diffusion"
    deltas, finish = [], None
    stream = chat.create(
        model="sharpen",
        messages=messages,
        max_tokens=64,
        stream=True,
        stream_options={"include_usage": True},
        extra_body=DIFFUSION,
    )
    usage = None
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            deltas.append(chunk.choices[0].delta.content)
        if chunk.choices and chunk.choices[0].finish_reason:
            finish = chunk.choices[0].finish_reason
        usage = chunk.usage or usage
    text = final.choices[0].message.content
    assert text and "".join(deltas) == text
    # Streamed as the draft settled, in more than one piece; deltas only ever add text.
    assert len(deltas) > 1 and all(deltas)
    assert finish == final.choices[0].finish_reason
    assert usage is not None and usage.completion_tokens == final.usage.completion_tokens  # type: ignore[union-attr]


def test_a_stop_string_ends_a_diffusion_draft_before_it(base_url: str) -> None:
    chat = client(base_url).chat.completions
    messages: Any = [{"role": "user", "content": INSTRUCTION}]
    free = chat.create(model="sharpen", messages=messages, max_tokens=64, extra_body=DIFFUSION)
    text = free.choices[0].message.content or ""
    words = text.split()
    stop = words[len(words) // 4]
    stopped = chat.create(model="sharpen", messages=messages, max_tokens=64, stop=[stop], extra_body=DIFFUSION)
    assert stopped.choices[0].message.content == text[: text.find(stop)]
    assert stopped.choices[0].finish_reason == "stop"
    assert sharpen_of(stopped)["finish_reason"] == "stop"
    # The passes after the stop string settled were not run.
    assert sharpen_of(stopped)["passes"] < sharpen_of(free)["passes"]
    streamed = chat.create(
        model="sharpen", messages=messages, max_tokens=64, stop=[stop], stream=True, extra_body=DIFFUSION
    )
    pieces = [c.choices[0].delta.content or "" for c in streamed if c.choices]
    assert "".join(pieces) == text[: text.find(stop)]


def test_sampling_options_and_sharpen_options_are_honoured(base_url: str) -> None:
    chat = client(base_url).chat.completions
    messages: Any = [{"role": "user", "content": INSTRUCTION}]
    # The blank-lines rule and end-of-text in order may hold a commit back to the next pass (a pass more than
    # asked, where the sampled draft meets them): off here, so the passes are exactly the steps asked for.
    body = {"sharpen": {"engine": "diffusion", "steps": 8, "block_length": 16, "blank_lines": 0, "eos": "free"}}
    first = chat.create(model="sharpen", messages=messages, max_tokens=32, temperature=1.0, seed=7, extra_body=body)
    again = chat.create(model="sharpen", messages=messages, max_tokens=32, temperature=1.0, seed=7, extra_body=body)
    other = chat.create(model="sharpen", messages=messages, max_tokens=32, temperature=1.0, seed=8, extra_body=body)
    sharpen = sharpen_of(first)
    assert sharpen["settings"]["steps"] == 8 and sharpen["settings"]["block_length"] == 16
    assert sharpen["settings"]["seed"] == 7 and sharpen["passes"] == 8
    assert first.choices[0].message.content == again.choices[0].message.content
    assert first.choices[0].message.content != other.choices[0].message.content
    ar_first = chat.create(model="smollm2-135m-instruct", messages=messages, max_tokens=16, temperature=1.0, seed=3)
    ar_again = chat.create(model="smollm2-135m-instruct", messages=messages, max_tokens=16, temperature=1.0, seed=3)
    assert ar_first.choices[0].message.content == ar_again.choices[0].message.content


def test_an_option_only_diffusion_reads_drafts_with_diffusion_and_one_that_contradicts_the_model_is_a_400(
    base_url: str,
) -> None:
    """The README's `{"sharpen": {"steps": 32}}`: short requests the router sends to AR, pinned to diffusion."""
    chat, steps = client(base_url).chat.completions, {"sharpen": {"steps": 4}}
    raw = chat.with_raw_response.create(
        model="sharpen", messages=[{"role": "user", "content": INSTRUCTION}], max_tokens=8, extra_body=steps
    )
    assert raw.headers["x-sharpen-engine"] == "diffusion"
    assert raw.headers["x-sharpen-reason"].startswith("sharpen.steps is read only by the diffusion engine")
    assert sharpen_of(raw.parse())["passes"] == 4
    turns: Any = [
        {"role": "user", "content": "My name is Ana."},
        {"role": "assistant", "content": "Nice to meet you, Ana."},
        {"role": "user", "content": "What is my name?"},
    ]
    assert sharpen_of(chat.create(model="sharpen", messages=turns, max_tokens=8, extra_body=steps))["engine"] == (
        "diffusion"
    )
    plain = client(base_url).completions.create(model="sharpen", prompt="Dear Sam,", max_tokens=8, extra_body=steps)
    assert sharpen_of(plain)["engine"] == "diffusion"
    with pytest.raises(openai.BadRequestError) as conflict:
        chat.create(
            model="smollm2-135m-instruct",
            messages=[{"role": "user", "content": "Hi"}],
            extra_body={"sharpen": {"threshold": 0.9}},
        )
    assert conflict.value.status_code == 400 and conflict.value.message.endswith(
        "model 'smollm2-135m-instruct' asks for the AR engine, but sharpen.threshold is read only by the diffusion "
        "engine: drop one or the other"
    )
    with pytest.raises(openai.BadRequestError) as against_the_field:
        client(base_url).completions.create(
            model="sharpen", prompt="Dear Sam,", max_tokens=8, extra_body={"sharpen": {"engine": "ar", "top_k": 5}}
        )
    assert "sharpen.engine asks for the AR engine, but sharpen.top_k is read only" in against_the_field.value.message


def test_a_conversation_with_earlier_replies_is_answered_by_ar(base_url: str, service: SharpenService) -> None:
    turns: Any = [
        {"role": "user", "content": "My name is Ana."},
        {"role": "assistant", "content": "Nice to meet you, Ana."},
        {"role": "user", "content": "What is my name?"},
    ]
    # Each from a cold cache: a prompt decoded in one batch and one decoded a token at a time after a cached
    # prefix differ in their last bits (ggml's AMX kernels take batches), and greedy text can follow them.
    service.engines.writer().forget_cache()  # chat replies run on the writing model
    reply = client(base_url).chat.completions.create(model="sharpen", messages=turns, max_tokens=48)
    assert sharpen_of(reply)["engine"] == "ar"
    service.engines.writer().forget_cache()
    assert reply.choices[0].message.content == service.chat(turns, max_tokens=48).text()
    assert "Ana" in (reply.choices[0].message.content or "")


def test_completions_continue_a_prompt_and_fill_a_gap(base_url: str, service: SharpenService) -> None:
    completions = client(base_url).completions
    plain = completions.create(model="sharpen", prompt="Dear Sam, thanks for", max_tokens=8)
    assert plain.choices[0].text == service.complete("Dear Sam, thanks for", max_tokens=8).text()
    assert sharpen_of(plain)["engine"] == "ar"
    before, after = "Dear Sam,\n\nThank you for the invitation.", "\n\nBest wishes,\nAna"
    routed = completions.create(model="sharpen", prompt=before, suffix=after, max_tokens=48)
    as_routed = service.draft(DraftRequest("infill", before=before, after=after, tokens=48))
    assert routed.choices[0].text == as_routed.text() and sharpen_of(routed)["route"]["engine"] == as_routed.engine
    # The gap filled by diffusion, with both sides in view, as served and as streamed.
    gap = completions.create(model="sharpen", prompt=before, suffix=after, max_tokens=48, extra_body=DIFFUSION)
    expected = service.draft(DraftRequest("infill", before=before, after=after, tokens=48, engine="diffusion"))
    assert gap.choices[0].text == expected.text()
    assert sharpen_of(gap)["route"]["engine"] == expected.engine == "diffusion"
    streamed = completions.create(
        model="sharpen", prompt=before, suffix=after, max_tokens=48, stream=True, extra_body=DIFFUSION
    )
    assert "".join(chunk.choices[0].text for chunk in streamed if chunk.choices) == expected.text()


def test_infill_answers_in_llama_servers_shape(base_url: str, service: SharpenService) -> None:
    """What llama.vim sends: the text before the cursor's line, the line up to the cursor, the text after."""
    body = {
        "input_prefix": "def add(a, b):\n",
        "prompt": "    return",
        "input_suffix": "\n\nprint(add(1, 2))\n",
        "input_extra": [{"filename": "notes.py", "text": "# adding numbers\n"}],
        "n_predict": 8,
        "stream": False,
    }
    answer = httpx.post(f"{base_url}/infill", json=body, timeout=60).json()
    expected = service.complete(
        "# adding numbers\ndef add(a, b):\n    return", "\n\nprint(add(1, 2))\n", max_tokens=8
    ).text()
    assert answer["content"] == expected
    assert answer["stop"] is True and answer["stop_type"] in ("eos", "limit")
    assert answer["tokens_predicted"] >= 1 and answer["truncated"] is False
    assert set(answer["timings"]) >= {"prompt_n", "prompt_ms", "predicted_n", "predicted_ms", "predicted_per_second"}
    with httpx.stream("POST", f"{base_url}/infill", json=body | {"stream": True}, timeout=60) as response:
        chunks = [json.loads(data) for _, data in sse_events(response)]
    assert "".join(chunk["content"] for chunk in chunks) == expected
    assert chunks[-1]["stop"] is True and all(chunk["stop"] is False for chunk in chunks[:-1])


def test_infill_warm_up_evaluates_the_context_and_answers_nothing(base_url: str) -> None:
    """llama.vim's request when its extra context changes: `n_predict: 0`, the context alone; the next
    request that starts with that context finds it in the AR engine's cache."""
    extra = [{"filename": "notes.txt", "text": "Meeting notes: the budget review moves to Thursday at ten.\n"}]
    warm = {"input_prefix": "", "input_suffix": "", "input_extra": extra, "prompt": "", "n_predict": 0}
    answer = httpx.post(f"{base_url}/infill", json=warm | {"samplers": [], "cache_prompt": True}, timeout=60).json()
    assert answer["content"] == "" and answer["tokens_predicted"] == 0
    only = httpx.post(
        f"{base_url}/infill", json=warm | {"response_fields": ["content", "timings/prompt_n"]}, timeout=60
    )
    assert set(only.json()) == {"content", "timings/prompt_n"}
    assert answer["sharpen"]["engine"] == "ar" and answer["tokens_evaluated"] > 10
    follow = warm | {"input_prefix": "Dear Sam,\n", "n_predict": 4}
    cached = httpx.post(f"{base_url}/infill", json=follow, timeout=60).json()
    assert cached["tokens_cached"] >= answer["tokens_evaluated"] - 1


def test_the_pass_stream_shows_every_pass_and_ends_with_the_trace(base_url: str) -> None:
    body = {"prompt": INSTRUCTION, "max_tokens": 32, "sharpen": {"steps": 8}}
    with httpx.stream("POST", f"{base_url}/v1/sharpen/drafts", json=body, timeout=60) as response:
        assert response.status_code == 200
        events = [(name, json.loads(data)) for name, data in sse_events(response)]
    names = [name for name, _ in events]
    assert names == ["route"] + ["pass"] * 8 + ["done"]
    passes = [data for name, data in events if name == "pass"]
    assert [p["index"] for p in passes] == list(range(8))
    for earlier, later in itertools.pairwise(passes):
        assert later["settled_text"].startswith(earlier["settled_text"])
        assert sum(later["masked"]) < sum(earlier["masked"])
    assert all(len(p["committed"]) == len(p["confidences"]) for p in passes)
    done = events[-1][1]
    assert done["text"].startswith(passes[-1]["settled_text"])
    records = done["trace"]
    assert records[0]["model"] == "sharpen-draft" and len(records) == 1 + 8 + 1


def test_bad_requests_get_openai_shaped_errors(base_url: str) -> None:
    bad_json = httpx.post(f"{base_url}/v1/chat/completions", content=b"{not json", timeout=30)
    assert bad_json.status_code == 400 and "not JSON" in bad_json.json()["error"]["message"]
    deep = httpx.post(f"{base_url}/v1/chat/completions", content=b"[" * 100_000 + b"]" * 100_000, timeout=30)
    assert deep.status_code == 400 and "nested too deeply" in deep.json()["error"]["message"]
    no_messages = httpx.post(f"{base_url}/v1/chat/completions", json={"model": "sharpen"}, timeout=30)
    assert no_messages.status_code == 400 and no_messages.json()["error"]["param"] == "messages"
    chat = client(base_url).chat.completions
    long_text = "The quarterly report covers revenue, costs and hiring in detail. " * 400
    with pytest.raises(openai.BadRequestError) as too_long:
        chat.create(model="sharpen", messages=[{"role": "user", "content": long_text}], max_tokens=8)
    assert too_long.value.code == "context_length_exceeded" and "context of 2048" in too_long.value.message
    with pytest.raises(openai.BadRequestError) as unknown_option:
        chat.create(model="sharpen", messages=[{"role": "user", "content": "Hi"}], extra_body={"sharpen": {"k": 1}})
    assert "unknown options ['k']" in unknown_option.value.message
    with pytest.raises(openai.BadRequestError) as bad_value:
        chat.create(model="sharpen", messages=[{"role": "user", "content": "Hi"}], extra_body={"sharpen": {"steps": 0}})
    assert "sharpen.steps must be at least 1" in bad_value.value.message
    with pytest.raises(openai.NotFoundError) as unknown_model:
        chat.create(model="gpt-9", messages=[{"role": "user", "content": "Hi"}])
    assert "no model 'gpt-9'" in unknown_model.value.message
    empty = httpx.post(f"{base_url}/v1/completions", json={"prompt": "   ", "max_tokens": 4}, timeout=30)
    assert empty.status_code == 400 and "empty" in empty.json()["error"]["message"]


# Many passes, and end-of-text settles last, so that the draft cannot end early.
LONG: dict[str, Any] = {"steps": 512, "block_length": 512, "eos": "last"}


def _status(base_url: str) -> dict[str, Any]:
    return httpx.get(f"{base_url}/v1/sharpen/status", timeout=10).json()["engines"]


def _long_draft(base_url: str) -> Any:
    """A diffusion draft of many passes, streamed (so it is running when its first pass arrives)."""
    body = {"prompt": INSTRUCTION, "max_tokens": 512, "sharpen": LONG}
    return httpx.stream("POST", f"{base_url}/v1/sharpen/drafts", json=body, timeout=120)


def test_a_full_queue_answers_429_and_the_other_engine_still_serves(service: SharpenService) -> None:
    with running_server(service, ServerOptions(queue=0)) as url, _long_draft(url) as running:
        events = sse_events(running)  # kept: closing it closes the response
        next(events)  # the route: the draft has its engine
        with pytest.raises(openai.RateLimitError) as refused:
            client(url).chat.completions.create(
                model="sharpen",
                messages=[{"role": "user", "content": INSTRUCTION}],
                max_tokens=64,
                extra_body=DIFFUSION,
            )
        assert int(refused.value.response.headers["retry-after"]) >= 1
        assert refused.value.code == "queue_full"
        diffusion = _status(url)["diffusion"]
        assert diffusion["running"] is True and diffusion["refused"] == 1
        # AR has its own engine and queue: served while the draft runs.
        reply = client(url).completions.create(model="sharpen", prompt="Dear Sam,", max_tokens=4)
        assert reply.choices[0].text
        assert _status(url)["ar"]["served"] == 1 and _status(url)["diffusion"]["served"] == 0


def test_a_busy_ar_engine_says_when_to_retry_and_a_remote_sharpen_passes_it_on(
    service: SharpenService, tmp_path: Path
) -> None:
    """Completions carry no route estimate: Retry-After comes from the AR costs for the request's length. A
    second Sharpen whose AR model is this server hears the 429 as 'busy', with the server's Retry-After."""
    long_prompt = "The committee reviewed the budget, the hiring plan and the office move in detail. " * 90
    with running_server(service, ServerOptions(queue=0)) as url:
        holder = threading.Thread(
            target=lambda: httpx.post(
                f"{url}/v1/completions", json={"prompt": long_prompt, "max_tokens": 200}, timeout=120
            )
        )
        holder.start()
        assert _wait_for(lambda: _status(url)["ar"]["running"])
        with pytest.raises(openai.RateLimitError) as refused:
            client(url).completions.create(model="sharpen", prompt="Dear Sam,", max_tokens=1000)
        estimated = estimate_ar(1000, 0, service.routing.cost_profile()[0].ar).seconds
        assert int(refused.value.response.headers["retry-after"]) == max(1, math.ceil(estimated))
        remote_name = f"openai:{url}/v1#smollm2-135m-instruct"
        remote = SharpenService(
            Config(models=ModelsSection(complete=remote_name, draft="")), SharpenPaths.under(tmp_path)
        )
        with pytest.raises(EngineBusy) as busy:
            remote.complete("Dear Sam,", max_tokens=1000).text()
        assert "is busy (429)" in str(busy.value) and busy.value.retry_after_s == max(1, math.ceil(estimated))
        answer = api_error_for(busy.value)
        assert (answer.status, answer.code, answer.headers["Retry-After"]) == (
            503,
            "engine_busy",
            str(busy.value.retry_after_s),
        )
        holder.join(timeout=120)


def test_a_burst_larger_than_the_old_queue_of_four_is_all_answered(service: SharpenService) -> None:
    """A script's batch sent at once, behind a running request, against the default queue: every request
    waits its turn and is answered; none is turned away (the clients retry nothing)."""
    long_prompt = "The committee reviewed the budget, the hiring plan and the office move in detail. " * 60
    answered: list[str] = []
    with running_server(service) as url:
        holder = threading.Thread(
            target=lambda: httpx.post(
                f"{url}/v1/completions", json={"prompt": long_prompt, "max_tokens": 400}, timeout=120
            )
        )
        holder.start()
        assert _wait_for(lambda: _status(url)["ar"]["running"])

        def ask(number: int) -> None:
            reply = client(url).completions.create(model="sharpen", prompt=f"Note {number}: dear Sam,", max_tokens=2)
            answered.append(reply.choices[0].text)

        burst = [threading.Thread(target=ask, args=(number,)) for number in range(12)]
        for thread in burst:
            thread.start()
        waited_at_once = _wait_for(lambda: _status(url)["ar"]["waiting"] >= 12)
        for thread in [*burst, holder]:
            thread.join(timeout=120)
        ar = _status(url)["ar"]
    assert waited_at_once, "the burst waited behind the running request, more at once than the old queue of 4"
    assert len(answered) == 12 and ar["refused"] == 0 and ar["served"] == 13


def test_a_client_that_disconnects_cancels_its_draft(service: SharpenService) -> None:
    with running_server(service, ServerOptions(queue=0)) as url:
        with _long_draft(url) as running:
            events = sse_events(running)
            next(events)
            assert next(events)[0] == "pass"
        # The connection is closed: the draft stops within a pass and its engine is free again.
        deadline = time.monotonic() + 10
        while _status(url)["diffusion"]["running"] and time.monotonic() < deadline:
            time.sleep(0.05)
        diffusion = _status(url)["diffusion"]
        assert diffusion["running"] is False and diffusion["cancelled"] == 1 and diffusion["served"] == 0
        reply = client(url).chat.completions.create(
            model="sharpen", messages=[{"role": "user", "content": INSTRUCTION}], max_tokens=32, extra_body=DIFFUSION
        )
        assert reply.choices[0].message.content


def _wait_for(condition: Any, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.05)
    return bool(condition())


def test_a_client_that_leaves_while_queued_or_unstreamed_gives_its_place_back(service: SharpenService) -> None:
    """What an editor plugin does on every keystroke: drop the request it made a moment ago."""
    body = {"prompt": INSTRUCTION, "max_tokens": 512, "sharpen": LONG}
    with running_server(service, ServerOptions(queue=1)) as url:
        with _long_draft(url) as running:
            events = sse_events(running)  # kept: closing it closes the response
            next(events)
            with pytest.raises(httpx.ReadTimeout):  # waits behind the running draft, then the client goes
                httpx.post(f"{url}/v1/sharpen/drafts", json=body | {"stream": False}, timeout=0.5)
            assert _wait_for(lambda: _status(url)["diffusion"]["waiting"] == 0)
            diffusion = _status(url)["diffusion"]
            assert diffusion["running"] is True and diffusion["cancelled"] == 1
        assert _wait_for(lambda: not _status(url)["diffusion"]["running"])
        messages = [{"role": "user", "content": INSTRUCTION}]
        chat_body = {"messages": messages, "max_tokens": 512, "sharpen": LONG | {"engine": "diffusion"}}
        with pytest.raises(httpx.ReadTimeout):  # runs unstreamed, and its client goes
            httpx.post(f"{url}/v1/chat/completions", json=chat_body, timeout=1.0)
        assert _wait_for(lambda: not _status(url)["diffusion"]["running"])
        diffusion = _status(url)["diffusion"]
        assert diffusion["cancelled"] == 3 and diffusion["served"] == 0


def test_an_api_key_is_checked(service: SharpenService) -> None:
    with running_server(service, ServerOptions(api_key="s3cret")) as url:
        with pytest.raises(openai.AuthenticationError) as wrong:
            client(url, key="guess").models.list()
        assert wrong.value.code == "invalid_api_key"
        missing = httpx.get(f"{url}/v1/models", timeout=10)
        assert missing.status_code == 401 and missing.json()["error"]["code"] == "invalid_api_key"
        assert next(m.id for m in client(url, key="s3cret").models.list()) == "sharpen"
        assert httpx.get(f"{url}/v1/models", headers={"X-Api-Key": "s3cret"}, timeout=10).status_code == 200


def test_a_remote_openai_compatible_model_serves_completions(
    base_url: str, service: SharpenService, tmp_path: Path
) -> None:
    """A second Sharpen whose AR model is the first one's server: completions, chat and calibration go
    through the real `openai` client over loopback."""
    remote_name = f"openai:{base_url}/v1#smollm2-135m-instruct"
    # One try: a draft checked against its instruction (chat.fact_tries) may be drafted again, sampled.
    config = Config(models=ModelsSection(complete=remote_name, draft=""), chat=ChatSection(fact_tries=1))
    remote = SharpenService(config, SharpenPaths.under(tmp_path))
    assert remote.routing.present_engines() == {"ar": remote_name}
    completed = remote.complete("Dear Sam, thanks for", max_tokens=8, stop=["!"])
    assert completed.text() == service.complete("Dear Sam, thanks for", max_tokens=8, stop=["!"]).text()
    assert completed.model == remote_name
    instruction = "Write a one-sentence thank-you note to Sam."
    # The server answers a chat as a draft: checked against what it asks, as the served service drafts it.
    served = service.draft(DraftRequest("draft", instruction, tokens=24)).text()
    assert remote.chat(instruction, max_tokens=24).text() == served
    drafted = remote.draft(DraftRequest("draft", instruction, tokens=64))
    assert (
        drafted.engine == "ar" and drafted.text() == service.draft(DraftRequest("draft", instruction, tokens=64)).text()
    )
    profile = remote.calibrations.calibrate(QUICK, lambda _fraction, _label: None)
    assert profile.ar.model == remote_name and profile.ar.measured
    assert profile.ar.seconds_per_token > 0 and profile.ar.prompt_tokens_per_s > 0
    assert remote.routing.cost_profile()[0].ar.measured


def test_a_remote_model_that_does_not_answer_is_one_clear_error(tmp_path: Path) -> None:
    config = Config(models=ModelsSection(complete="openai:http://127.0.0.1:9/v1#nothing", draft=""))
    remote = SharpenService(config, SharpenPaths.under(tmp_path))
    with pytest.raises(EngineError) as error:
        remote.complete("Dear Sam,", max_tokens=4).text()
    assert type(error.value) is EngineError
    assert "nothing at http://127.0.0.1:9/v1 did not answer" in str(error.value)
