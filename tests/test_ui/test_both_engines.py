"""Both engines in plain view: the draft and rewrite dialogs' engine field (remembered for the session), the
palette's "Draft with diffusion" and "Draft with AR", the route with both estimates in the panel, the other
engine's candidate beside a draft (Ctrl+E) with each candidate's engine, time and speed, and F5 playing an AR draft
back token by token. The real embedded AR model and a tiny real diffusion GGUF."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from textual.widgets import Input, Label, Select
from ui_support import AppFactory, make_config

from app.recording.frames import Frame, Mark
from engines.events import Pass
from ui.app import SharpenApp
from ui.refinement import RefinementView
from ui.screens.dialogs import DraftPromptScreen, RewriteScreen
from ui.screens.playback import PlaybackScreen

from .test_drafts import wait_until

DOCUMENT = "Hi Sam,\n\nThanks for the invitation to Friday's planning meeting.\n\n"


def text_of(app: SharpenApp, selector: str) -> str:
    return str(app.panel.query_one(selector, Label).render())


async def test_the_engine_field_drafts_with_diffusion_and_f5_plays_its_passes(
    make_app: AppFactory, tiny_cacheable_path: Path
) -> None:
    config = make_config(tiny_cacheable_path, autocomplete=False)
    config = dataclasses.replace(config, router=dataclasses.replace(config.router, policy="measured"))
    app = make_app(config=config)
    async with app.run_test(size=(100, 30)) as pilot:
        app.editor.load_text(DOCUMENT)
        app.editor.move_cursor(app.editor.document.end)
        await pilot.press("ctrl+d")
        dialog = app.screen
        assert isinstance(dialog, DraftPromptScreen)
        assert dialog.query_one("#draft-engine", Select).value == "auto", "auto (the router) until the writer chooses"
        await pilot.press(*"decline politely")
        # The engine field by keyboard: tab past the length, open the list, down twice to diffusion.
        await pilot.press("tab", "tab", "enter", "down", "down", "enter")
        assert dialog.query_one("#draft-engine", Select).value == "diffusion"
        assert dialog.focused is dialog.query_one("#draft-prompt", Input), "back in the prompt: enter drafts"
        dialog.query_one("#draft-tokens", Input).value = "48"
        shown: list[int] = []

        def refining_pass() -> bool:
            current = app.panel.view.current
            if isinstance(current, Pass) and (not shown or shown[-1] != current.index):
                shown.append(current.index)
            return app.draft is not None and app.draft.state == "ready"

        await pilot.press("enter")
        assert await wait_until(pilot, refining_pass)
        assert app.draft is not None and app.draft.reply is not None and app.draft.request is not None
        assert app.draft.request.engine == "diffusion" and app.draft.reply.route.rule == "forced"
        assert app.status.info.engine == "diffusion" and app.status.info.passes == 12 == len(app.draft.passes)
        assert shown and shown[-1] == 11, "the panel drew the passes as they came"
        route = text_of(app, "#draft-route")
        chosen = r"diffusion, as chosen \((the router would choose AR|the router's choice too)\) · "
        assert re.match(chosen, route), route
        assert " · estimated for 48 tokens: AR " in route and ", diffusion " in route
        assert " · ctrl+e: AR's draft too · why: " in route
        assert "f5 plays the passes back" in text_of(app, "#draft-hint")

        await pilot.press("f5")
        playback = app.screen
        assert isinstance(playback, PlaybackScreen)
        assert [frame.step for frame in playback.frames] == [f"pass {n} of 12" for n in range(1, 13)]
        await pilot.press("home", "right")
        view = playback.query_one("#playback-view", RefinementView)
        assert isinstance(view.current, Frame) and view.current.step == "pass 2 of 12"
        assert "pass 2 of 12" in str(playback.query_one("#playback-position", Label).render())
        await pilot.press("escape")

        # Remembered for the session: the next draft's dialog, and the rewrite's, start on diffusion.
        await pilot.press("escape", "ctrl+d")
        assert isinstance(app.screen, DraftPromptScreen)
        assert app.screen.query_one("#draft-engine", Select).value == "diffusion"
        await pilot.press("escape")
        app.editor.move_cursor((2, 0))
        app.editor.move_cursor((2, 6), select=True)
        await pilot.press("ctrl+r")
        assert isinstance(app.screen, RewriteScreen)
        assert app.screen.query_one("#draft-engine", Select).value == "diffusion"


async def test_the_other_engine_writes_a_candidate_beside_the_draft(
    make_app: AppFactory, tiny_cacheable_path: Path
) -> None:
    app = make_app(config=make_config(tiny_cacheable_path, autocomplete=False))
    async with app.run_test(size=(100, 30)) as pilot:
        app.editor.load_text(DOCUMENT)
        app.editor.move_cursor(app.editor.document.end)
        await pilot.press("ctrl+d", *"decline politely")
        app.screen.query_one("#draft-tokens", Input).value = "40"
        await pilot.press("enter")
        assert await wait_until(pilot, lambda: app.draft is not None and app.draft.state == "ready")
        assert app.draft is not None and app.draft.engine == "diffusion", "the router's choice (policy quality)"
        assert not app.panel.query_one("#draft-candidates").display, "one candidate: no list"
        route = text_of(app, "#draft-route")
        assert route.startswith("diffusion, the router's choice · estimated for 40 tokens: AR ")
        assert " · ctrl+e: AR's draft too · why: quality: diffusion refines the whole draft" in route
        first = app.draft

        await pilot.press("ctrl+e")
        assert await wait_until(pilot, lambda: app.draft is not first and app.draft is not None)
        assert await wait_until(pilot, lambda: app.draft is not None and app.draft.state == "ready")
        second = app.draft
        assert second is not None and second.engine == "ar" and second.request is not None
        assert first.request is not None and second.request == dataclasses.replace(first.request, engine="ar")
        assert app.panel.candidates == [first, second]
        assert app.status.info.engine == "ar" and app.panel.view.streamed == second.done.text  # type: ignore[union-attr]
        strip = app.panel.query_one("#draft-candidates", Label)
        assert strip.display
        labels = str(strip.render())
        assert first.figures is not None and second.figures is not None
        assert f"1. {first.figures.label()}" in labels and f"▸ 2. {second.figures.label()}" in labels
        assert labels.startswith("1. diffusion · ") and " tok/s" in labels and "2. AR · " in labels
        assert "candidate 2 of 2" in text_of(app, "#draft-title")
        assert text_of(app, "#draft-route").startswith("AR, as chosen (the router would choose diffusion) · ")

        # Flip between them: the label, the view and the status follow.
        await pilot.press("ctrl+pageup")
        assert app.draft is first and isinstance(app.panel.view.current, Pass)
        assert "▸ 1. diffusion" in str(strip.render()) and app.status.info.engine == "diffusion"
        await pilot.press("ctrl+e")
        assert app.draft is second, "the AR candidate of this request is already there: shown, not drafted again"
        assert len(app.panel.candidates) == 2

        # The AR candidate plays back token by token.
        assert "f5 plays it back token by token" in text_of(app, "#draft-hint")
        await pilot.press("f5")
        playback = app.screen
        assert isinstance(playback, PlaybackScreen)
        trace = playback.trace
        assert trace.engine == "ar" and len(playback.frames) == len(trace.tokens) > 1
        total = trace.stats.generated_tokens if trace.stats is not None else 0
        assert playback.frames[-1].step == f"token {total} of {total}"
        await pilot.press("home")
        view = playback.query_one("#playback-view", RefinementView)
        assert isinstance(view.current, Frame) and view.current.text == trace.tokens[0].text
        await pilot.press("right", "right")
        assert isinstance(view.current, Frame) and view.current.text == "".join(t.text for t in trace.tokens[:3])
        assert [cell.mark for cell in view.current.cells][-1] == Mark.WRITTEN
        position = str(playback.query_one("#playback-position", Label).render())
        assert position.startswith(f"token {trace.tokens[2].index + 1} of {total} · ") and "tokens/s" in position


async def test_the_palette_drafts_with_either_engine(make_app: AppFactory, tiny_cacheable_path: Path) -> None:
    app = make_app(config=make_config(tiny_cacheable_path, autocomplete=False))
    async with app.run_test(size=(100, 30)) as pilot:
        commands = {command.title: command for command in app.get_system_commands(app.screen)}
        for title, engine in (("Draft with diffusion", "diffusion"), ("Draft with AR", "ar")):
            commands[title].callback()
            await pilot.pause()
            assert isinstance(app.screen, DraftPromptScreen)
            assert app.screen.query_one("#draft-engine", Select).value == engine
            await pilot.press("escape")
        await pilot.press("ctrl+d")
        assert isinstance(app.screen, DraftPromptScreen)
        assert app.screen.query_one("#draft-engine", Select).value == "auto", "a dialog cancelled chooses nothing"
        await pilot.press("escape")
        commands["Draft with AR"].callback()
        await pilot.pause()
        await pilot.press(*"say hello", "enter")
        assert await wait_until(pilot, lambda: app.draft is not None and app.draft.state == "ready")
        assert app.draft is not None and app.draft.engine == "ar"
        assert "ctrl+e: diffusion's draft too" in text_of(app, "#draft-route")


async def test_ctrl_e_without_a_draft_is_the_editors_end_of_line(make_app: AppFactory) -> None:
    app = make_app(config=make_config(None, autocomplete=False))
    async with app.run_test(size=(80, 24)) as pilot:
        app.editor.load_text("Dear Sam,\nthanks")
        app.editor.move_cursor((0, 0))
        await pilot.press("ctrl+e")
        assert app.editor.cursor_location == (0, 9)


async def test_without_a_draft_model_the_panel_says_how_to_get_one(make_app: AppFactory) -> None:
    app = make_app(config=make_config(None, autocomplete=False))
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("ctrl+d", *"say hello")
        app.screen.query_one("#draft-tokens", Input).value = "40"
        await pilot.press("enter")
        assert await wait_until(pilot, lambda: app.draft is not None and app.draft.state == "ready")
        route = text_of(app, "#draft-route")
        assert route.startswith("AR, the router's choice · estimated for 40 tokens: AR ")
        assert " · no diffusion model is configured (f2 chooses one) · why: only the AR engine's model" in route
        assert "ctrl+e" not in route
        await pilot.press("ctrl+e")
        assert len(app.panel.candidates) == 1, "no candidate that could only fail"
        assert await wait_until(pilot, lambda: any("f2 chooses one" in n.message for n in app._notifications))
