"""TUI responsiveness while a draft refines: keypress-to-echo latency and refinement frames per second.

Headless (Textual's run_test). A 256-token draft refines in a worker thread while the benchmark posts
key events to the app, as the terminal driver does; a keystroke's latency runs from posting the key
until the editor holds the character (the screen refresh follows within Textual's frame interval).
Frames per second counts the refinement view's renders during the draft. Two models: the tiny
random-weight diffusion GGUF (passes arrive as fast as llama.cpp makes them: a stress test for the UI)
and the 135M stand-in (bench/stand_in.py: passes cost what a small real model's cost, and compete with
the UI for the two cores).

    .venv/bin/python bench/tui.py
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from fixture_models import write_tiny_model
from machine import describe_machine
from rich.text import Text
from stand_in import write_stand_in
from textual import events

from app.domain.draft_request import DraftRequest
from app.service import SharpenService
from app.storage.config import Config, DiffusionSection, ModelsSection, RouterSection, UiSection
from app.storage.paths import sharpen_paths
from models.catalogue import resolve_model
from router.request import Quality
from ui.app import SharpenApp
from ui.refinement import RefinementView

OUT = Path(__file__).resolve().parent / "out"
TOKENS = 256


def config_for(model: Path, quality: Quality) -> Config:
    return dataclasses.replace(
        Config(),
        models=ModelsSection(draft=str(model)),
        # "quality" always drafts with diffusion; the preset sets K (fast N/8, balanced N/4, best N/2).
        router=RouterSection(policy="quality", quality=quality, latency_budget_s=0.0, auto_calibrate=False),
        diffusion=DiffusionSection(tokens=TOKENS, block_length=32),
        ui=dataclasses.replace(UiSection(), autocomplete=False),
    )


async def measure(model: Path, quality: Quality, keystrokes: int) -> tuple[list[float], float, int]:
    app = SharpenApp(SharpenService(config_for(model, quality), sharpen_paths()))
    frames: list[float] = []
    render = RefinementView.render

    def counting_render(self: RefinementView) -> Text:
        frames.append(time.perf_counter())
        return render(self)

    RefinementView.render = counting_render  # type: ignore[method-assign]  # counts the view's frames; restored below
    latencies: list[float] = []
    try:
        async with app.run_test(size=(100, 30)) as pilot:
            app.service.engines.diffusion()  # load the model before timing
            app.start_draft(
                DraftRequest("draft", "Write a long letter to the team about the move", tokens=TOKENS), "Draft"
            )
            started = time.perf_counter()
            while not app.draft or not app.draft.passes:
                await pilot.pause(0.01)
            for i in range(keystrokes):
                if app.draft.done is not None:
                    break
                char = "abcdefghij"[i % 10]
                expected = app.editor.text + char
                sent = time.perf_counter()
                # As the terminal driver does (Pilot.press waits for an idle app, which a refining
                # draft never is).
                app.post_message(events.Key(char, char))
                while app.editor.text != expected:
                    await asyncio.sleep(0.0005)
                latencies.append(time.perf_counter() - sent)
                await asyncio.sleep(0.05)
            while app.draft.done is None:
                await pilot.pause(0.05)
            elapsed = time.perf_counter() - started
            passes = len(app.draft.passes)
    finally:
        RefinementView.render = render  # type: ignore[method-assign]  # the original render back
    during = [f for f in frames if started <= f <= started + elapsed]
    return latencies, len(during) / elapsed, passes


def report(name: str, latencies: list[float], fps: float, passes: int) -> None:
    ordered = sorted(latencies)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))] * 1000
    print(
        f"{name:28} keys {len(latencies):3} | echo p50 {statistics.median(latencies) * 1000:6.1f} ms, "
        f"p95 {p95:6.1f} ms (target <= 50) | {passes:3} passes | view {fps:5.1f} frames/s (target >= 20; "
        "a frame needs a new pass)"
    )


def main() -> None:
    print(f"machine: {describe_machine()}")
    with tempfile.TemporaryDirectory() as home:
        os.environ["SHARPEN_HOME"] = home
        OUT.mkdir(parents=True, exist_ok=True)  # write_tiny_model does not make its folder
        tiny = write_tiny_model(OUT / "tiny-cacheable.gguf", causal=False, mask_token_id=16, shift_logits=False)
        stand_in = write_stand_in(
            resolve_model("smollm2-135m-instruct").path, OUT / "smollm2-cacheable.gguf", arch="llama", causal=False
        )
        runs: tuple[tuple[str, Path, Quality, int], ...] = (
            ("tiny model, N=256, K=N/2", tiny, "best", 60),
            ("135M stand-in, N=256, K=N/4", stand_in, "balanced", 60),
        )
        for name, model, quality, keys in runs:
            latencies, fps, passes = asyncio.run(measure(model, quality, keys))
            report(name, latencies, fps, passes)


if __name__ == "__main__":
    main()
