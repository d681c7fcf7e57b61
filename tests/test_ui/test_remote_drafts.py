"""The editor drafting on another machine: a real `sharpen serve` on loopback (the "GPU box", on the tiny
diffusion GGUF) as the diffusion engine. Its passes animate in the panel and F5 plays them back; with the box
stopped, the next draft is written by this machine's AR engine and the route line says why."""

from __future__ import annotations

import contextlib
import dataclasses
from pathlib import Path

from textual.widgets import Label
from ui_support import AppFactory, ask_for_draft, make_config, wait_until

from app.server.threaded import running_server
from app.service import SharpenService
from app.storage.config import Config, ModelsSection, RouterSection
from app.storage.paths import SharpenPaths
from ui.screens.playback import PlaybackScreen


def gpu_box_service(draft_model: Path, home: Path) -> SharpenService:
    config = dataclasses.replace(
        Config(), models=ModelsSection(draft=str(draft_model)), router=RouterSection(auto_calibrate=False)
    )
    return SharpenService(config, SharpenPaths.under(home))


async def test_a_remote_draft_animates_replays_and_falls_back_when_the_remote_stops(
    make_app: AppFactory, tiny_cacheable_path: Path, tmp_path: Path
) -> None:
    with contextlib.ExitStack() as gpu_box:
        url = gpu_box.enter_context(running_server(gpu_box_service(tiny_cacheable_path, tmp_path / "gpu-box")))
        config = make_config(autocomplete=False)
        config = dataclasses.replace(config, models=dataclasses.replace(config.models, draft=f"sharpen:{url}"))
        app = make_app(config=config)
        async with app.run_test(size=(120, 30)) as pilot:
            app.editor.load_text("Hi team,\n")
            app.editor.move_cursor(app.editor.document.end)
            await ask_for_draft(pilot, app, "Write a note about Friday", 48)
            assert await wait_until(pilot, lambda: app.draft is not None and app.draft.done is not None)
            draft = app.draft
            assert draft is not None and draft.done is not None and draft.reply is not None
            assert app.status.info.engine == "diffusion" and url in draft.reply.model
            # K = N/4 for "balanced", settled on the remote: every pass came over and was drawn, in order.
            assert [p.index for p in draft.passes] == list(range(12))
            assert app.panel.view.current is draft.passes[-1]
            assert draft.done.text.strip()

            await pilot.press("f5")
            playback = app.screen
            assert isinstance(playback, PlaybackScreen), "a remote draft plays back as a local one"
            assert playback.trace.engine == "diffusion" and len(playback.frames) == 12
            assert [p.canvas for p in playback.trace.passes] == [p.canvas for p in draft.passes]
            await pilot.press("escape")
            await pilot.press("escape")
            assert not app.panel.has_class("open")

            gpu_box.close()  # the GPU box goes away: the next draft is this machine's, and the panel says why
            await ask_for_draft(pilot, app, "Write a note about Friday", 48)
            assert await wait_until(pilot, lambda: app.draft is not None and app.draft.done is not None)
            assert app.status.info.engine == "ar"
            assert "does not answer" in app.status.info.reason and "AR on this machine" in app.status.info.reason
            route_line = str(app.panel.query_one("#draft-route", Label).render())
            assert "does not answer" in route_line and url in route_line
