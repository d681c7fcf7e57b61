"""Ghost-text autocomplete in the editor, from the real embedded AR engine."""

from __future__ import annotations

from typing import Any

from textual.pilot import Pilot
from ui_support import AppFactory, make_config

from app.domain.reply import Reply
from ui.app import SharpenApp
from ui.suggestions import SuggestionCache, fit_to_line, should_suggest


async def wait_for_suggestion(pilot: Pilot, app: SharpenApp, seconds: float = 20.0) -> str:
    for _ in range(int(seconds / 0.05)):
        await pilot.pause(0.05)
        if app.editor.suggestion:
            return app.editor.suggestion
    return ""


async def test_typing_shows_ghost_text_and_tab_accepts_it(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press(*"Dear Sam, thanks for")
        suggestion = await wait_for_suggestion(pilot, app)
        assert suggestion.strip(), "the AR engine suggested nothing"
        await pilot.press("tab")
        assert app.editor.text == "Dear Sam, thanks for" + suggestion
        assert app.editor.suggestion != suggestion  # accepted; a later suggestion continues from there


async def test_escape_dismisses_and_ctrl_right_accepts_a_word(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press(*"The meeting is on")
        suggestion = await wait_for_suggestion(pilot, app)
        assert suggestion
        first_word = suggestion[: len(suggestion) - len(suggestion.lstrip())] + suggestion.lstrip().split()[0]
        await pilot.press("ctrl+right")
        assert app.editor.text == "The meeting is on" + first_word
        await pilot.press("escape")
        assert app.editor.suggestion == ""
        assert app.editor.text == "The meeting is on" + first_word


async def test_typing_into_a_suggestion_costs_no_new_request(make_app: AppFactory) -> None:
    app = make_app()
    calls: list[str] = []
    async with app.run_test(size=(80, 24)) as pilot:
        original = app.service.complete

        # Whatever else the app passes goes through untouched: only the prefix is recorded.
        def counting(prefix: str, *args: Any, **kwargs: Any) -> Reply:
            calls.append(prefix)
            return original(prefix, *args, **kwargs)

        app.service.complete = counting  # type: ignore[method-assign]  # a spy that counts completion requests
        await pilot.press(*"Dear Sam, thanks for")
        suggestion = await wait_for_suggestion(pilot, app)
        assert len(suggestion) > 2
        requests = len(calls)
        await pilot.press(suggestion[0], suggestion[1])
        await pilot.pause(0.3)
        assert app.editor.suggestion == suggestion[2:]
        assert len(calls) == requests


async def test_no_suggestion_in_the_middle_of_a_line_or_when_off(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        app.editor.load_text("Hello  and some more words after the cursor")
        app.editor.move_cursor((0, 6))
        await pilot.press("x")
        assert await wait_for_suggestion(pilot, app, 1.0) == ""
        await pilot.press("ctrl+t")
        assert not app.editor.autocomplete and not app.status.info.autocomplete
        app.editor.load_text("Dear Sam, thanks for")
        app.editor.move_cursor(app.editor.document.end)
        await pilot.press("space")
        assert await wait_for_suggestion(pilot, app, 1.0) == ""


async def test_stale_replies_are_dropped(make_app: AppFactory) -> None:
    # A long debounce keeps the real engine out of this test: the replies are the test's own.
    app = make_app(config=make_config(autocomplete=False, debounce_ms=2000))
    async with app.run_test(size=(80, 24)) as pilot:
        editor = app.editor
        editor.set_autocomplete(True)
        editor.load_text("Hello")
        editor.move_cursor(editor.document.end)
        asked_before = editor.cursor_text()
        await pilot.press("!")
        assert not editor.offer(asked_before, " world")  # asked for before the "!" was typed
        assert editor.offer(editor.cursor_text(), " How are you?")
        assert editor.suggestion == " How are you?"


def test_cache_reuses_a_prefix_and_guards() -> None:
    cache = SuggestionCache(capacity=2)
    cache.store("Dear Sam", ", thanks for the")
    assert cache.lookup("Dear Sam") == ", thanks for the"
    assert cache.lookup("Dear Sam, tha") == "nks for the"
    assert cache.lookup("Dear Sax") is None
    cache.store("a", "b")
    cache.store("c", "d")
    assert cache.lookup("Dear Sam") is None and len(cache) == 2
    assert should_suggest("   ", 8) and not should_suggest("123456789", 8)
    assert fit_to_line("one\ntwo", at_end_of_line=False) == "one"
    assert fit_to_line("one\ntwo", at_end_of_line=True) == "one\ntwo"
