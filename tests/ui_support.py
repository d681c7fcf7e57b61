"""Helpers for the TUI tests (imported by tests/ui/conftest.py and the tests)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

from app.config import Config, DiffusionSection, ModelsSection, RouterSection, UiSection
from ui.app import SharpenApp

AppFactory = Callable[..., SharpenApp]


def make_config(draft_model: Path | None = None, quality: str = "balanced", **ui: object) -> Config:
    config = Config()
    return dataclasses.replace(
        config,
        models=ModelsSection(complete="smollm2-135m-instruct", draft=str(draft_model) if draft_model else ""),
        # "quality" sends every draft of 30 tokens or more to diffusion whatever this machine's costs.
        router=RouterSection(policy="quality", quality=quality, latency_budget_s=0.0),
        diffusion=DiffusionSection(tokens=48, block_length=16),
        ui=dataclasses.replace(UiSection(), **{"debounce_ms": 50, **ui}),  # type: ignore[arg-type]
    )
