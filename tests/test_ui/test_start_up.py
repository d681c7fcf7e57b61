"""What the editor does as it starts: costs measured under load are measured again in a worker thread, never on
the UI thread, and what came of it is said in a notification."""

from __future__ import annotations

import threading

import pytest
from ui_support import AppFactory


async def test_the_editor_measures_again_in_a_worker_and_says_so(
    make_app: AppFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = make_app()
    threads: list[threading.Thread] = []

    def remeasure() -> str | None:
        threads.append(threading.current_thread())
        return "costs measured under load were measured again on the idle machine (3.1 s)"

    monkeypatch.setattr(app.service, "remeasure_after_load", remeasure)
    async with app.run_test(size=(80, 24)) as pilot:
        for _ in range(200):
            if app._notifications:
                break
            await pilot.pause(0.05)
        assert [n.message for n in app._notifications] == [
            "costs measured under load were measured again on the idle machine (3.1 s)"
        ]
    assert threads and threads[0] is not threading.main_thread()
