"""The one service the TUI and the CLI both call. It owns configuration and loaded engines."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from app.config import Config, ConfigError, load_config
from app.paths import SharpenPaths, sharpen_paths
from engines.cancel import CancelToken
from engines.errors import EngineError
from engines.events import Event
from engines.llama_ar import LlamaAREngine, LlamaSettings, TrimPolicy
from models.catalogue import catalogue, resolve_model
from models.errors import ModelError

# Everything a user can be told about in one message and then exit on.
SharpenError = (ConfigError, ModelError, EngineError)


@dataclass(frozen=True)
class ModelStatus:
    name: str
    role: str
    engine: str
    description: str
    path: Path | None
    present: bool
    size_bytes: int | None
    in_use_for: tuple[str, ...]


class SharpenService:
    def __init__(self, config: Config, paths: SharpenPaths) -> None:
        self.config = config
        self.paths = paths
        self._engine_lock = threading.Lock()
        self._completion_engine: LlamaAREngine | None = None

    @classmethod
    def from_environment(cls) -> SharpenService:
        paths = sharpen_paths()
        return cls(load_config(paths.config_file), paths)

    # ----- engines -------------------------------------------------------------------------------

    def completion_engine(self) -> LlamaAREngine:
        """The AR engine for the configured completion model, loaded on first use."""
        with self._engine_lock:
            if self._completion_engine is None:
                model = resolve_model(self.config.models.complete)
                ar = self.config.ar
                settings = LlamaSettings(
                    n_ctx=ar.n_ctx, n_threads=ar.n_threads, n_batch=ar.n_batch, n_gpu_layers=ar.n_gpu_layers
                )
                self._completion_engine = LlamaAREngine(model.path, model.name, settings)
            return self._completion_engine

    # ----- requests ------------------------------------------------------------------------------

    def complete(
        self,
        prefix: str,
        suffix: str | None = None,
        *,
        max_tokens: int | None = None,
        stop: Sequence[str] = (),
        temperature: float | None = None,
        cancel: CancelToken | None = None,
        trim: TrimPolicy = "left",
    ) -> Iterator[Event]:
        settings = self.config.complete
        return self.completion_engine().complete(
            prefix,
            suffix,
            max_tokens=settings.max_tokens if max_tokens is None else max_tokens,
            stop=tuple(stop),
            temperature=settings.temperature if temperature is None else temperature,
            cancel=cancel,
            trim=trim,
        )

    def chat(
        self,
        instruction: str,
        *,
        max_tokens: int | None = None,
        temperature: float | None = None,
        cancel: CancelToken | None = None,
    ) -> Iterator[Event]:
        settings = self.config.chat
        return self.completion_engine().chat(
            instruction,
            max_tokens=settings.max_tokens if max_tokens is None else max_tokens,
            temperature=settings.temperature if temperature is None else temperature,
            cancel=cancel,
        )

    # ----- models --------------------------------------------------------------------------------

    def models(self) -> list[ModelStatus]:
        in_use = {"complete": self.config.models.complete}
        statuses: list[ModelStatus] = []
        for entry in catalogue().values():
            try:
                path: Path | None = resolve_model(entry.name).path
            except ModelError:
                path = None
            present = path is not None and path.is_file()
            statuses.append(
                ModelStatus(
                    name=entry.name,
                    role=entry.role,
                    engine=entry.engine,
                    description=entry.description,
                    path=path,
                    present=present,
                    size_bytes=path.stat().st_size if present and path else None,
                    in_use_for=tuple(role for role, name in in_use.items() if name == entry.name),
                )
            )
        return statuses
