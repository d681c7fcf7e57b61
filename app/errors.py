"""The errors a front end tells the user about in one message and then carries on (or exits) from."""

from __future__ import annotations

from app.domain.option_engines import OptionConflict
from app.storage.config import ConfigError
from engines.errors import EngineError
from engines.trace import TraceError
from models.errors import ModelError


class RoutingError(Exception):
    pass


SharpenError = (ConfigError, ModelError, EngineError, TraceError, RoutingError, OptionConflict)
