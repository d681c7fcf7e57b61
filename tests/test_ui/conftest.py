"""Fixtures for the TUI tests: an app factory on real models, and a fixed trace."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from scripted_backend import ScriptedBackend, fixed_script
from ui_support import AppFactory, make_config

from app.service import SharpenService
from app.storage.config import Config
from app.storage.paths import sharpen_paths
from app.storage.traces import save_trace
from engines.diffusion.sampler import DiffusionSampler
from engines.diffusion.settings import DiffusionSettings
from engines.events import Pass
from engines.trace import Trace, TraceHeader
from ui.app import SharpenApp


@pytest.fixture
def make_app(sharpen_home: Path) -> AppFactory:
    def factory(*, config: Config | None = None, document: Path | None = None, trace: Path | None = None) -> SharpenApp:
        service = SharpenService(config or make_config(), sharpen_paths())
        app = SharpenApp(service, document=document, trace=trace)
        app.animation_level = "none"
        return app

    return factory


@pytest.fixture
def fixed_trace(tmp_path: Path) -> Path:
    """A trace from a scripted backend: the same passes on every machine, each at 0.00 s (the clock it ran on
    would show in the playback screen, and a busy machine's is slower)."""
    targets = [t % 10 for t in range(16)]
    confidences = [0.2 + 0.05 * i for i in range(16)]
    backend = ScriptedBackend(fixed_script(targets, confidences, 2))
    settings = DiffusionSettings.reference(steps=4, block_length=8)
    trace = Trace(
        TraceHeader(
            "scripted",
            "test",
            "Write a list",
            2,
            16,
            backend.mask_token_id,
            settings.as_dict(),
            "2026-11-29T00:00:00+00:00",
        )
    )
    for event in DiffusionSampler(backend).generate([0, 1], 16, settings):
        trace.record(replace(event, elapsed_s=0.0) if isinstance(event, Pass) else event)
    path = tmp_path / "fixed.trace.jsonl"
    save_trace(trace, path)
    return path
