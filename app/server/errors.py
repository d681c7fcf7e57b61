"""Errors as OpenAI's API spells them: {"error": {"message", "type", "param", "code"}}."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from starlette.responses import JSONResponse

from app.domain.option_engines import OptionConflict
from app.errors import RoutingError
from app.orchestration.engine_registry import NoDraftModel
from app.storage.config import ConfigError
from engines.errors import EmptyPromptError, EngineBusy, EngineError, InvalidRequestError, PromptTooLongError
from models.errors import ModelError


class ApiError(Exception):
    def __init__(
        self,
        status: int,
        message: str,
        *,
        kind: str = "invalid_request_error",
        code: str | None = None,
        param: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.kind = kind
        self.code = code
        self.param = param
        self.headers = dict(headers or {})

    def body(self) -> dict[str, object]:
        return {"error": {"message": self.message, "type": self.kind, "param": self.param, "code": self.code}}

    def response(self) -> JSONResponse:
        return JSONResponse(self.body(), status_code=self.status, headers=self.headers)


def bad_request(message: str, *, param: str | None = None, code: str | None = None) -> ApiError:
    return ApiError(400, message, param=param, code=code)


def invalid_unicode(what: str, at: int, param: str | None) -> ApiError:
    """A string of the body that holds a lone surrogate (JSON's "\\ud800"), named by its path in the body."""
    return bad_request(
        f"{what} is not valid Unicode (a lone surrogate at character {at})", param=param, code="invalid_unicode"
    )


def api_error_for(error: Exception) -> ApiError:
    """What a client is told about an error raised while serving its request."""
    if isinstance(error, ApiError):
        return error
    if isinstance(error, PromptTooLongError):
        return bad_request(str(error), code="context_length_exceeded")
    if isinstance(error, InvalidRequestError | EmptyPromptError | ConfigError | RoutingError | OptionConflict):
        return bad_request(str(error))
    if isinstance(error, NoDraftModel):
        return ApiError(400, str(error), code="model_not_found")
    if isinstance(error, ModelError):
        return ApiError(503, str(error), kind="server_error", code="model_not_available")
    if isinstance(error, EngineBusy):
        headers = {"Retry-After": str(error.retry_after_s)} if error.retry_after_s else {}
        return ApiError(503, str(error), kind="server_error", code="engine_busy", headers=headers)
    if isinstance(error, EngineError):
        return ApiError(500, str(error), kind="server_error")
    if isinstance(error, UnicodeEncodeError) and "surrogate" in error.reason:
        # A lone surrogate of the request that a check missed: still the request's fault, not the server's.
        return bad_request(f"the request holds text that is not valid Unicode ({error.reason})", code="invalid_unicode")
    # A bug: the client gets one line, the server's log the traceback.
    logging.getLogger("sharpen.server").error("unexpected error serving a request", exc_info=error)
    return ApiError(500, f"internal error: {type(error).__name__}: {error}", kind="server_error")
