"""Drafts in the TUI: routed, animated pass by pass, cancelled, accepted; rewrites; keystrokes during a draft."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

from textual import events
from ui_support import AppFactory, ask_for_draft, make_config, wait_until

from app.domain.draft_request import DraftRequest
from ui.app import SharpenApp
from ui.screens.dialogs import RewriteScreen
from ui.screens.playback import PlaybackScreen


async def test_a_draft_animates_and_is_inserted(make_app: AppFactory, tiny_cacheable_path: Path) -> None:
    app = make_app(config=make_config(tiny_cacheable_path, autocomplete=False))
    async with app.run_test(size=(80, 24)) as pilot:
        app.editor.load_text("Hi team,\n")
        app.editor.move_cursor(app.editor.document.end)
        await ask_for_draft(pilot, app, "Write a note about Friday", 48)
        assert app.panel.has_class("open")
        assert await wait_until(pilot, lambda: app.draft is not None and app.draft.done is not None)
        assert app.draft is not None and app.draft.done is not None
        info = app.status.info
        assert info.engine == "diffusion" and info.state == "draft ready"
        assert "quality" in info.reason
        # K = N/4 for "balanced"; every pass is kept for playback, in order.
        assert info.passes == 12
        assert [p.index for p in app.draft.passes] == list(range(12))
        assert app.panel.view.current is app.draft.passes[-1]
        draft_text = app.draft.done.text
        await pilot.press("ctrl+y")
        assert app.editor.text == "Hi team,\n" + draft_text
        assert not app.panel.has_class("open") and app.draft is None


async def test_escape_cancels_a_running_draft(make_app: AppFactory, tiny_cacheable_path: Path) -> None:
    config = make_config(tiny_cacheable_path, quality="best", autocomplete=False)
    # Every pass decodes the whole sequence, so the draft is still refining when Escape arrives (with the
    # dual cache the tiny model can finish all its passes first).
    config = dataclasses.replace(config, diffusion=dataclasses.replace(config.diffusion, cache="none"))
    app = make_app(config=config)
    async with app.run_test(size=(80, 24)) as pilot:
        await ask_for_draft(pilot, app, "Write a long story", 512)
        assert await wait_until(pilot, lambda: app.draft is not None and len(app.draft.passes) >= 1)
        await pilot.press("escape")
        assert await wait_until(pilot, lambda: app.draft is not None and app.draft.done is not None)
        assert app.draft is not None and app.draft.done is not None
        assert app.draft.done.stats.finish_reason == "cancelled"
        assert len(app.draft.passes) < 256
        assert app.status.info.state == "cancelled"
        await pilot.press("escape")
        assert app.draft is None and not app.panel.has_class("open")


async def test_keystrokes_echo_while_a_draft_refines(make_app: AppFactory, tiny_cacheable_path: Path) -> None:
    # "best": K = N/2 = 256 passes, a few seconds of refining on the tiny model.
    app = make_app(config=make_config(tiny_cacheable_path, quality="best", autocomplete=False))

    def text_has_length(n: int) -> Callable[[], bool]:
        return lambda: len(app.editor.text) == n

    async with app.run_test(size=(80, 24)) as pilot:
        await ask_for_draft(pilot, app, "Write a long story", 512)
        assert await wait_until(pilot, lambda: app.draft is not None and len(app.draft.passes) >= 1)
        app.editor.focus()
        # Keys are posted as the terminal driver posts them: Pilot.press waits for an idle app, and
        # an app showing a refining draft is never idle.
        for count, char in enumerate("typing", start=1):
            app.post_message(events.Key(char, char))
            assert await wait_until(pilot, text_has_length(count), seconds=2.0)
        assert app.draft is not None and app.draft.done is None, "the draft was still refining"
        assert app.editor.text == "typing"
        await pilot.press("escape")
        assert await wait_until(pilot, lambda: app.draft is not None and app.draft.done is not None)


async def test_rewrite_replaces_the_selection(make_app: AppFactory, tiny_cacheable_path: Path) -> None:
    app = make_app(config=make_config(tiny_cacheable_path, autocomplete=False))
    async with app.run_test(size=(80, 24)) as pilot:
        before, selected, after = (
            "Dear Sam, ",
            "thank you so much for the lovely flowers and the card you sent last week, they made my day " * 2,
            " Best, Ana",
        )
        app.editor.load_text(before + selected + after)
        app.editor.move_cursor((0, len(before)))
        app.editor.move_cursor((0, len(before) + len(selected)), select=True)
        assert app.editor.selected_text == selected
        await pilot.press("ctrl+r")
        assert isinstance(app.screen, RewriteScreen)
        await pilot.press("enter")  # no instruction: fill the selection from both sides
        assert await wait_until(pilot, lambda: app.draft is not None and app.draft.done is not None)
        assert app.draft is not None and app.draft.done is not None and app.draft.reply is not None
        assert app.draft.kind == "infill" and app.status.info.engine == "diffusion"
        context = app.draft.reply.context
        assert context is not None and (context.before, context.after) == (before, after)
        replacement = app.draft.done.text
        await pilot.press("ctrl+y")
        assert app.editor.text == before + replacement + after


async def test_without_a_diffusion_model_drafts_stream_from_ar(make_app: AppFactory) -> None:
    app = make_app(config=make_config(None, autocomplete=False))
    async with app.run_test(size=(80, 24)) as pilot:
        await ask_for_draft(pilot, app, "Say hello to Sam", 40)
        assert await wait_until(pilot, lambda: app.draft is not None and app.draft.done is not None)
        assert app.status.info.engine == "ar" and "only the AR engine" in app.status.info.reason
        assert app.panel.view.streamed.strip()
        await pilot.press("f5")
        playback = app.screen
        assert isinstance(playback, PlaybackScreen), "an AR draft plays back token by token"
        assert playback.trace.engine == "ar" and playback.frames[-1].text == app.draft.done.text  # type: ignore[union-attr]


async def test_rewrite_needs_a_selection(make_app: AppFactory) -> None:
    app = make_app(config=make_config(None, autocomplete=False))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("ctrl+r")
        assert app.draft is None
        assert any("select the text" in n.message for n in app._notifications)


async def test_a_failed_draft_says_why_inserts_nothing_and_closes(
    make_app: AppFactory, tiny_cacheable_path: Path
) -> None:
    app = make_app(config=make_config(tiny_cacheable_path, autocomplete=False))
    async with app.run_test(size=(80, 24)) as pilot:
        app.editor.load_text("Hi team,\n")
        # The dialog refuses an empty instruction; the engine refuses it too, in the worker.
        app.start_draft(DraftRequest("draft", "   ", tokens=48), "Draft")
        assert app.draft is not None and app.draft.state == "refining"
        assert await wait_until(pilot, lambda: app.draft is not None and app.draft.state == "failed")
        assert app.status.info.state == "draft failed"
        # notify() posts a message to the app, so the note may land a moment after the state changes.
        assert await wait_until(pilot, lambda: any("empty" in n.message for n in app._notifications))
        await pilot.press("ctrl+y")
        assert app.editor.text == "Hi team,\n", "a failed draft has nothing to insert"
        await pilot.press("escape")
        assert app.draft is None and not app.panel.has_class("open") and app.status.info.state == "ready"


def state(app: SharpenApp) -> str:
    return "closed" if app.draft is None else app.draft.state


async def test_a_finished_draft_is_ready_and_a_cancelled_one_cancelled(
    make_app: AppFactory, tiny_cacheable_path: Path
) -> None:
    app = make_app(config=make_config(tiny_cacheable_path, autocomplete=False))
    async with app.run_test(size=(80, 24)) as pilot:
        app.start_draft(DraftRequest("draft", "Write a note", tokens=48), "Draft")
        assert await wait_until(pilot, lambda: app.draft is not None and app.draft.state != "refining")
        assert state(app) == "ready" and app.panel.last_trace is not None
        await pilot.press("escape")
        app.start_draft(DraftRequest("draft", "Write a long story", tokens=512), "Draft")
        assert await wait_until(pilot, lambda: app.draft is not None and len(app.draft.passes) >= 1)
        await pilot.press("escape")
        assert await wait_until(pilot, lambda: app.draft is not None and app.draft.state != "refining")
        assert state(app) == "cancelled"


async def test_the_first_draft_measures_the_machine_before_it_is_routed(
    make_app: AppFactory, tiny_cacheable_path: Path
) -> None:
    app = make_app(config=make_config(tiny_cacheable_path, autocomplete=False, auto_calibrate=True))
    async with app.run_test(size=(80, 24)) as pilot:
        assert app.service.calibrations.needed() == ["ar", "diffusion"], "a fresh install has only estimates"
        app.start_draft(DraftRequest("draft", "Write a note", tokens=48), "Draft")
        assert await wait_until(pilot, lambda: state(app) == "ready", seconds=60)
        assert app.service.calibrations.needed() == []
        profile, _ = app.service.routing.cost_profile()
        assert profile.diffusion.measured and profile.diffusion.model == tiny_cacheable_path.name
        assert profile.ar.measured and profile.ar.model == "sharpen-write"
        assert app.service.routing.profile_path.is_file()
        assert "the AR model and the draft model measured on this machine first" in app.status.info.reason
        app.start_draft(DraftRequest("draft", "Write another note", tokens=48), "Draft")
        assert await wait_until(pilot, lambda: state(app) == "ready", seconds=60)
        assert "measured on this machine" not in app.status.info.reason, "once"
