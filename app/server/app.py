"""The HTTP application: routes, the API key, and one handler shape for every generating endpoint."""

from __future__ import annotations

import contextlib
import hmac
import json
import logging
import threading
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import Headers
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from app.server.deltas import TextDeltas
from app.server.errors import ApiError, api_error_for, bad_request
from app.server.queueing import EngineQueue, QueueFull
from app.server.requests import ROUTED, Call, chat_call, completion_call, draft_call, infill_call
from app.server.running import ClientGone, DisconnectWatch, ReplyRun
from app.server.shapes import (
    Shape,
    finish_reason,
    infill_body,
    only_fields,
    pass_body,
    route_headers,
    sharpen_field,
)
from app.service import SharpenService
from app.storage.config import ServerSection
from engines.events import Done, Event, Pass
from router.cost import estimate_ar
from router.request import ENGINES, EngineName

# Seconds between SSE comments that keep a quiet stream (long passes between settled text) open through proxies.
PING_S = 15
# Every line of a stream ends the same way (sse-starlette's own default is CRLF for events, LF for pings).
SEP = "\n"
# Streamed as the last event of an OpenAI stream.
DONE_MARKER = "[DONE]"


@dataclass(frozen=True)
class ServerOptions:
    # None: no key is asked for (loopback only; the CLI refuses other addresses without one).
    api_key: str | None = None
    # Requests each engine keeps waiting behind the one it runs (the default: server.queue's).
    queue: int = ServerSection().queue


class _ApiKey:
    """`Authorization: Bearer KEY` (what OpenAI's clients send) or `X-Api-Key: KEY`, compared in constant time.
    Plain ASGI, so that streamed responses and disconnects pass through untouched."""

    def __init__(self, app: ASGIApp, key: str) -> None:
        self._app = app
        self._key = key.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = Headers(scope=scope)
            given = headers.get("x-api-key", "")
            scheme, _, token = headers.get("authorization", "").partition(" ")
            if scheme.lower() == "bearer":
                given = token.strip()
            if not hmac.compare_digest(given.encode(), self._key):
                error = ApiError(
                    401, "a valid API key is needed: send Authorization: Bearer KEY", code="invalid_api_key"
                )
                await error.response()(scope, receive, send)
                return
        await self._app(scope, receive, send)


# What each endpoint streams: the events of a running call, as SSE events.
Streamer = Callable[[Call, ReplyRun, Event], AsyncIterator[ServerSentEvent]]
# What each endpoint answers when not streaming: the body, from the finished call.
Answer = Callable[[Call, Done], dict[str, Any]]


class SharpenServer:
    def __init__(self, service: SharpenService, options: ServerOptions) -> None:
        self.service = service
        self.options = options
        self.queues = {engine: EngineQueue(engine, options.queue) for engine in ENGINES}

    # ----- endpoints -----------------------------------------------------------------------------

    async def models(self, _request: Request) -> JSONResponse:
        configured = self.service.config.models
        try:
            present = self.service.routing.present_engines()
        except Exception as error:
            return api_error_for(error).response()
        entries: list[tuple[str, str, EngineName | None]] = [(ROUTED, "router", None)]
        entries.append((configured.complete, "complete", "ar"))
        if self.service.engines.writing_model != configured.complete:
            entries.append((self.service.engines.writing_model, "write", "ar"))
        if configured.draft.strip():
            entries.append((configured.draft, "draft", "diffusion"))
        data = [
            {
                "id": name,
                "object": "model",
                "created": 0,
                "owned_by": "sharpen",
                "sharpen": {"role": role, "engine": engine, "present": engine is None or engine in present},
            }
            for name, role, engine in entries
        ]
        return JSONResponse({"object": "list", "data": data})

    async def status(self, _request: Request) -> JSONResponse:
        """Each engine's queue, and the draft model with its calibration: what a Sharpen on another machine that
        drafts here estimates its drafts with (adding the round trip it measures)."""
        try:
            draft = await run_in_threadpool(self._draft_status)
        except Exception as error:
            return api_error_for(error).response()
        engines = {name: queue.as_json() for name, queue in self.queues.items()}
        return JSONResponse({"engines": engines, "draft": draft})

    def _draft_status(self) -> dict[str, Any]:
        routing = self.service.routing
        present = routing.present_engines()
        profile, _warning = routing.cost_profile()
        return {
            "model": profile.diffusion.model or present.get("diffusion", ""),
            "present": "diffusion" in present,
            "device": profile.device,
            "calibrated": profile.calibrated and profile.diffusion.measured,
            "costs": asdict(profile.diffusion),
        }

    async def chat_completions(self, request: Request) -> Response:
        return await self._serve(request, chat_call, self._chat_stream, lambda call, done: self._shape(call).chat(done))

    async def completions(self, request: Request) -> Response:
        return await self._serve(
            request, completion_call, self._completion_stream, lambda call, done: self._shape(call).completion(done)
        )

    async def infill(self, request: Request) -> Response:
        return await self._serve(request, infill_call, self._infill_stream, self._infill_body)

    async def drafts(self, request: Request) -> Response:
        return await self._serve(request, draft_call, self._pass_stream, self._draft_body)

    # ----- one handler for all -------------------------------------------------------------------

    async def _serve(
        self,
        request: Request,
        make_call: Callable[[SharpenService, Mapping[str, Any]], Call],
        streamer: Streamer,
        answer: Answer,
    ) -> Response:
        try:
            body = await self._body(request)
            call = await run_in_threadpool(make_call, self.service, body)
        except Exception as error:
            return api_error_for(error).response()
        queue = self.queues[call.reply.engine]
        try:
            queue.admit(lambda: self._estimate_s(call))
        except QueueFull as full:
            headers = {"Retry-After": str(full.retry_after_s)}
            return ApiError(429, str(full), kind="rate_limit_error", code="queue_full", headers=headers).response()
        watch = DisconnectWatch(request)
        run: ReplyRun | None = None
        try:
            await watch.until(queue.wait_turn())
            run = ReplyRun(call.reply, call.cancel, queue.finish)
            run.start()
            first = await watch.until(run.next())
            assert first is not None, "every reply yields at least its Done"
            headers = route_headers(call.reply)
            if call.stream:
                watch.stop()  # sse-starlette listens for the disconnect from here on
                stream = self._cancelling(run, streamer(call, run, first))
                return EventSourceResponse(stream, headers=headers, ping=PING_S, sep=SEP)
            done = first
            while not isinstance(done, Done):
                event = await watch.until(run.next())
                if event is None:
                    raise RuntimeError("the reply ended without Done")
                done = event
            return JSONResponse(answer(call, done), headers=headers)
        except ClientGone:
            if run is not None:
                run.cancel()
            return Response(status_code=499)
        except Exception as error:
            return api_error_for(error).response()
        finally:
            watch.stop()

    def _estimate_s(self, call: Call) -> float:
        """How long the request is expected to hold its engine (Retry-After is this times the requests
        ahead): the route's estimate, or for a completion (routed without one) the AR costs for its length."""
        estimate = call.reply.route.estimates.get(call.reply.engine)
        if estimate is not None:
            return estimate.seconds
        profile, _warning = self.service.routing.cost_profile()
        return estimate_ar(call.reply.tokens, 0, profile.ar).seconds

    @staticmethod
    async def _body(request: Request) -> Mapping[str, Any]:
        raw = await request.body()
        try:
            body = json.loads(raw or b"{}")
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            raise bad_request(f"the body is not JSON: {error}") from None
        except RecursionError:  # nested deeper than Python's parser goes
            raise bad_request("the body is not JSON Sharpen can read: it is nested too deeply") from None
        if not isinstance(body, dict):
            raise bad_request("the body must be a JSON object")
        return body

    @staticmethod
    async def _cancelling(run: ReplyRun, events: AsyncIterator[ServerSentEvent]) -> AsyncIterator[ServerSentEvent]:
        """Cancels the engine's work when the stream ends early (the client went: sse-starlette cancels us); an
        error after the first event is the stream's last event, in OpenAI's error shape."""
        try:
            async for event in events:
                yield event
        except Exception as error:
            yield ServerSentEvent(data=json.dumps(api_error_for(error).body()), sep=SEP)
        finally:
            run.cancel()

    @staticmethod
    async def _events(run: ReplyRun, first: Event) -> AsyncIterator[Event]:
        yield first
        while (event := await run.next()) is not None:
            yield event

    @staticmethod
    def _shape(call: Call) -> Shape:
        return Shape("chatcmpl" if call.reply.kind in ("draft", "chat") else "cmpl", call)

    # ----- streams -------------------------------------------------------------------------------

    @staticmethod
    def _json(payload: Any, event: str | None = None) -> ServerSentEvent:
        return ServerSentEvent(data=json.dumps(payload, ensure_ascii=False), event=event, sep=SEP)

    async def _chat_stream(self, call: Call, run: ReplyRun, first: Event) -> AsyncIterator[ServerSentEvent]:
        shape, deltas = self._shape(call), TextDeltas(call.reply, call.stop)
        yield self._json(shape.chat_chunk({"role": "assistant", "content": ""}))
        async for event in self._events(run, first):
            delta = deltas.feed(event)
            if delta:
                yield self._json(shape.chat_chunk({"content": delta}))
            if isinstance(event, Done):
                yield self._json(shape.chat_chunk({}, finish=finish_reason(event)))
                if call.include_usage:
                    yield self._json(shape.chat_usage_chunk(event))
        yield ServerSentEvent(data=DONE_MARKER, sep=SEP)

    async def _completion_stream(self, call: Call, run: ReplyRun, first: Event) -> AsyncIterator[ServerSentEvent]:
        shape, deltas = self._shape(call), TextDeltas(call.reply, call.stop)
        async for event in self._events(run, first):
            delta = deltas.feed(event)
            if delta:
                yield self._json(shape.completion_chunk(delta))
            if isinstance(event, Done):
                yield self._json(shape.completion_chunk("", finish=finish_reason(event)))
                if call.include_usage:
                    yield self._json(shape.completion_usage_chunk(event))
        yield ServerSentEvent(data=DONE_MARKER, sep=SEP)

    async def _infill_stream(self, call: Call, run: ReplyRun, first: Event) -> AsyncIterator[ServerSentEvent]:
        deltas = TextDeltas(call.reply, call.stop)
        async for event in self._events(run, first):
            delta = deltas.feed(event)
            if delta:
                yield self._json({"content": delta, "stop": False})
            if isinstance(event, Done):
                yield self._json(infill_body(call.reply, event) | {"content": ""})

    async def _pass_stream(self, call: Call, run: ReplyRun, first: Event) -> AsyncIterator[ServerSentEvent]:
        yield self._json(sharpen_field(call.reply), event="route")
        async for event in self._events(run, first):
            if isinstance(event, Pass):
                yield self._json(pass_body(call.reply, event), event="pass")
            elif isinstance(event, Done):
                yield self._json(self._draft_body(call, event), event="done")

    @staticmethod
    def _infill_body(call: Call, done: Done) -> dict[str, Any]:
        body = infill_body(call.reply, done, warm_up=call.warm_up)
        return body if call.fields is None else only_fields(body, call.fields)

    @staticmethod
    def _draft_body(call: Call, done: Done) -> dict[str, Any]:
        trace = call.reply.trace()
        records = trace.records() if trace is not None else []
        return {"text": done.text, "sharpen": sharpen_field(call.reply, done), "trace": records}


@contextlib.asynccontextmanager
async def _remeasuring(app: Starlette) -> AsyncIterator[None]:
    """At start-up: costs measured under load are measured again, in a thread, once the machine is idle."""

    def remeasure() -> None:
        said = app.state.server.service.remeasure_after_load()
        if said is not None:
            logging.getLogger("sharpen.server").warning(said)

    threading.Thread(target=remeasure, name="sharpen-remeasure", daemon=True).start()
    yield


def build_app(service: SharpenService, options: ServerOptions | None = None) -> Starlette:
    options = options or ServerOptions()
    server = SharpenServer(service, options)
    routes = [
        Route("/v1/models", server.models, methods=["GET"]),
        Route("/v1/chat/completions", server.chat_completions, methods=["POST"]),
        Route("/v1/completions", server.completions, methods=["POST"]),
        Route("/infill", server.infill, methods=["POST"]),
        Route("/v1/sharpen/drafts", server.drafts, methods=["POST"]),
        Route("/v1/sharpen/status", server.status, methods=["GET"]),
    ]
    middleware = [Middleware(_ApiKey, key=options.api_key)] if options.api_key else []
    app = Starlette(
        routes=routes,
        middleware=middleware,
        exception_handlers={404: _not_found, 405: _not_allowed},
        lifespan=_remeasuring,
    )
    app.state.server = server
    return app


async def _not_found(request: Request, _error: Exception) -> Response:
    return ApiError(404, f"no endpoint {request.url.path}", code="not_found").response()


async def _not_allowed(request: Request, _error: Exception) -> Response:
    return ApiError(405, f"{request.method} is not allowed on {request.url.path}", code="method_not_allowed").response()
