"""The settings a draft runs with: the draft model's own defaults (its catalogue entry's, or its GGUF's
metadata) where the user chose none, then config.toml's [diffusion], then the request's own options."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from app.orchestration.model_manager import ModelManager
from app.storage.config import Config, ConfigError, DiffusionSection, read_raw
from engines.diffusion.settings import DiffusionSettings
from engines.options import options
from models.decoding import file_decoding
from models.errors import ModelError
from router.request import DiffusionPlan


class DraftSettings:
    def __init__(self, config: Callable[[], Config], models: ModelManager, config_file: Path) -> None:
        self._config = config
        self.models = models
        self.config_file = config_file

    def resolve(self, **overrides: Any) -> DiffusionSettings:
        """The draft settings: the draft model's own defaults where the user set none in config.toml, then the
        configured ones, then any non-None overrides (the command line's, a request's)."""
        given = {name: value for name, value in overrides.items() if value is not None}
        chosen_by_user = self._set_by_user | set(given)
        model_defaults = {name: value for name, value in self._model_decoding().items() if name not in chosen_by_user}
        if "steps" in chosen_by_user and "threshold" not in chosen_by_user:
            model_defaults.pop("threshold", None)  # fixed steps asked for: the model's threshold would ignore them
        return DiffusionSettings.taken_from(replace(self._config().diffusion, **model_defaults), **given)

    def plan(self, settings: DiffusionSettings | None = None) -> DiffusionPlan:
        """What the router's estimates need of the settings."""
        chosen = settings or self.resolve()
        return DiffusionPlan(chosen.steps, chosen.block_length, chosen.threshold, chosen.schedule)

    def _model_decoding(self) -> dict[str, Any]:
        name = self.models.serving("draft").name.strip()
        entry = self.models.catalogue().get(name) if name else None
        if entry is None:
            if not name:
                return {}
            try:
                return file_decoding(self.models.resolve(name).path)
            except ModelError:
                return {}
        decoding: dict[str, Any] = {}
        if entry.decoding_threshold:
            decoding["threshold"] = entry.decoding_threshold
        if entry.decoding_block_length:
            decoding["block_length"] = entry.decoding_block_length
        if entry.decoding_sampler:
            decoding["sampler"] = entry.decoding_sampler
        if entry.decoding_no_doubled_words:
            decoding["no_doubled_words"] = True
        return decoding

    @functools.cached_property
    def _set_by_user(self) -> set[str]:
        """[diffusion] options the user chose: written in config.toml, or (a config built in code) not the
        default. Read once, as the config is: the session changes only its models."""
        try:
            written = set(read_raw(self.config_file).get("diffusion", {}))
        except ConfigError:
            written = set()
        defaults, configured = DiffusionSection(), self._config().diffusion
        changed = {
            item.name
            for item in options(DiffusionSettings)
            if getattr(configured, item.name) != getattr(defaults, item.name)
        }
        return written | changed
