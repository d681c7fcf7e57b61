"""Helpers for the TUI tests (imported by tests/ui/conftest.py and the tests)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import TypedDict, Unpack

from textual.pilot import Pilot
from textual.widgets import Input

from app.storage.config import Config, DiffusionSection, ModelsSection, RouterSection, UiSection
from router.request import Quality
from ui.app import SharpenApp
from ui.screens.dialogs import DraftPromptScreen

AppFactory = Callable[..., SharpenApp]


class UiOverrides(TypedDict, total=False):
    """UiSection's fields, any of which a test may set."""

    autocomplete: bool
    debounce_ms: int
    suggestion_tokens: int
    max_chars_right_of_cursor: int
    autosave_s: float
    theme: str


def make_config(
    draft_model: Path | None = None,
    quality: Quality = "balanced",
    auto_calibrate: bool = False,
    **ui: Unpack[UiOverrides],
) -> Config:
    """The TUI tests' config. The quick calibration before a fresh install's first draft is off unless a test
    asks for it: it would add its seconds to every test's first draft."""
    config = Config()
    overrides: UiOverrides = {"debounce_ms": 50, **ui}
    return dataclasses.replace(
        config,
        models=ModelsSection(complete="smollm2-135m-instruct", draft=str(draft_model) if draft_model else ""),
        # "quality" sends every draft of 30 tokens or more to diffusion whatever this machine's costs.
        router=RouterSection(policy="quality", quality=quality, latency_budget_s=0.0, auto_calibrate=auto_calibrate),
        diffusion=DiffusionSection(tokens=48, block_length=16),
        ui=dataclasses.replace(UiSection(), **overrides),
    )


async def wait_until(pilot: Pilot, condition: Callable[[], bool], seconds: float = 30.0) -> bool:
    for _ in range(int(seconds / 0.05)):
        if condition():
            return True
        await pilot.pause(0.05)
    return condition()


async def ask_for_draft(pilot: Pilot, app: SharpenApp, prompt: str, tokens: int) -> None:
    await pilot.press("ctrl+d")
    assert isinstance(app.screen, DraftPromptScreen)
    await pilot.press(*prompt)
    tokens_input = app.screen.query_one("#draft-tokens", Input)
    tokens_input.value = str(tokens)
    await pilot.press("enter")
