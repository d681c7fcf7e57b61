"""One service call per intent: the reply carries its route and settings, runs once, and builds its trace."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from app.cli import build_parser
from app.domain.draft_request import DraftRequest
from app.service import SharpenService
from app.storage.config import Config, ModelsSection, RouterSection, settings_registry
from app.storage.paths import sharpen_paths
from engines.diffusion.settings import DiffusionSettings
from engines.events import DiffusionStats, GenerationStats, Pass, Token
from engines.options import options


def service_with(draft_model: Path | None) -> SharpenService:
    config = dataclasses.replace(
        Config(),
        models=ModelsSection(draft=str(draft_model) if draft_model else ""),
        # "quality" sends every draft of 30 tokens or more to diffusion whatever this machine's costs.
        router=RouterSection(policy="quality", latency_budget_s=0.0),
    )
    return SharpenService(config, sharpen_paths())


def test_a_diffusion_draft_reply_runs_once_and_builds_its_trace(tiny_cacheable_path: Path) -> None:
    reply = service_with(tiny_cacheable_path).draft(DraftRequest("draft", "Write a note to Sam.", tokens=32))
    assert reply.engine == "diffusion" and reply.settings is not None
    # The router's K for "balanced" (N/4), in the settings the reply runs with and reports.
    assert reply.settings.steps == 8 == reply.planned_passes
    assert reply.trace() is None, "nothing has run yet"
    events = list(reply)
    assert all(isinstance(e, Pass) for e in events[:-1]) and reply.passes == events[:-1]
    assert reply.done is events[-1] and isinstance(reply.done.stats, DiffusionStats)
    trace = reply.trace()
    assert trace is not None and trace.text == reply.text() and len(trace.passes) == reply.done.stats.passes
    assert trace.header.model == tiny_cacheable_path.name and trace.header.settings == reply.settings.as_dict()
    assert trace.header.canvas_length == 32 and trace.header.kind == "draft"
    payload = reply.as_json()
    assert payload["engine"] == "diffusion" and payload["passes"] == reply.done.stats.passes
    with pytest.raises(RuntimeError, match="read once"):
        list(reply)


def test_steps_given_with_the_request_are_kept(tiny_cacheable_path: Path) -> None:
    service = service_with(tiny_cacheable_path)
    request = DraftRequest(
        "infill", before="Dear Sam,", after=" Best, Ana", tokens=32, overrides={"steps": 4, "seed": None}
    )
    reply = service.draft(request)
    assert reply.settings is not None and reply.settings.steps == 4 and reply.settings.seed == 0
    reply.text()
    trace = reply.trace()
    assert trace is not None and trace.header.prompt == "Dear Sam,\u2026 Best, Ana" and trace.header.kind == "infill"


def test_without_a_diffusion_model_a_draft_reply_streams_from_ar() -> None:
    reply = service_with(None).draft(DraftRequest("draft", "Say hello to Sam", tokens=12))
    assert reply.engine == "ar" and reply.settings is None and reply.planned_passes is None
    events = list(reply)
    assert any(isinstance(e, Token) for e in events) and reply.passes == []
    assert reply.done is not None and isinstance(reply.done.stats, GenerationStats)
    assert "settings" not in reply.as_json()
    # An AR draft keeps its tokens with their arrival times: F5 and `replay` play it back left to right.
    trace = reply.trace()
    assert trace is not None and trace.engine == "ar" and not trace.passes
    written = [event for event in events if isinstance(event, Token)]
    assert [arrival.text for arrival in trace.tokens] == [token.text for token in written]
    assert all(a.elapsed_s <= b.elapsed_s for a, b in zip(trace.tokens, trace.tokens[1:], strict=False))


def test_each_draft_option_is_a_setting_and_a_flag_with_one_default() -> None:
    registry = settings_registry()
    draft_flags = vars(build_parser().parse_args(["draft", "Hi"]))
    for item in options(DiffusionSettings):
        assert f"diffusion.{item.name}" in registry, item.name
        assert item.name in draft_flags, item.name
    # The defaults users get are the engine's own.
    assert DiffusionSettings.taken_from(Config().diffusion) == DiffusionSettings()
    assert DiffusionSettings().eos == "in_order" and DiffusionSettings().spacing == 3
    assert DiffusionSettings.reference().eos == "free" and DiffusionSettings.reference().spacing == 0
    # An off value given for a request turns the option off.
    section = dataclasses.replace(Config().diffusion, threshold=0.5)
    assert DiffusionSettings.taken_from(section, threshold=0.0).threshold is None
    assert DiffusionSettings.taken_from(section, threshold=None).threshold == 0.5
