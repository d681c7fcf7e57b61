"""What the draft's worker does off the UI thread (routing reads files), and the pass count it reports."""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path
from typing import Any

from ui_support import AppFactory, make_config

from app.domain.draft_request import DraftRequest
from ui.status import StatusInfo

from .test_drafts import ask_for_draft, wait_until


async def test_routing_reads_no_file_on_the_ui_thread(
    make_app: AppFactory, tiny_cacheable_path: Path, sharpen_home: Path
) -> None:
    """Routing reads the calibration, the stats, config.toml and the models' headers: in the draft's worker."""
    app = make_app(config=make_config(tiny_cacheable_path, autocomplete=False))
    read_on_ui_thread: list[str] = []
    recording = threading.Event()

    def watched(path: object) -> str | None:
        if not isinstance(path, str | bytes | os.PathLike):
            return None  # a file descriptor
        name = os.fsdecode(path)
        return name if name.startswith(str(sharpen_home)) or name.endswith((".gguf", ".toml")) else None

    async with app.run_test(size=(80, 24)) as pilot:
        ui_thread = threading.get_ident()

        def record(event: str, args: tuple[Any, ...]) -> None:
            if recording.is_set() and event in ("open", "os.listdir", "os.scandir") and args:
                name = watched(args[0])
                if name is not None and threading.get_ident() == ui_thread:
                    read_on_ui_thread.append(f"{event} {name}")

        # An audit hook stays for the rest of the session: the flag keeps it quiet outside this test.
        sys.addaudithook(record)
        recording.set()
        try:
            await ask_for_draft(pilot, app, "Write a note", 48)
            assert await wait_until(pilot, lambda: app.draft is not None and app.draft.done is not None)
        finally:
            recording.clear()
        assert app.status.info.engine == "diffusion" and app.status.info.state == "draft ready"
    assert read_on_ui_thread == []


async def test_the_pass_count_never_runs_past_the_planned_one(make_app: AppFactory, tiny_cacheable_path: Path) -> None:
    """SDAR's decoding gives every block a pass at least: 3 blocks in 2 steps take 3 passes, and the status
    bar says so (it read "pass 3 of 2")."""
    app = make_app(config=make_config(tiny_cacheable_path, autocomplete=False))
    shown: list[StatusInfo] = []
    async with app.run_test(size=(80, 24)) as pilot:
        report = app.panel.report

        def recording(**changes: Any) -> None:
            report(**changes)
            shown.append(app.status.info)

        app.panel.report = recording
        overrides = {"sampler": "sdar", "steps": 2}
        app.start_draft(DraftRequest("draft", "Write a note", tokens=48, overrides=overrides), "Draft")
        assert await wait_until(pilot, lambda: app.draft is not None and app.draft.done is not None)
        info = app.status.info
        assert info.state == "draft ready" and info.engine == "diffusion"
        assert (info.passes, info.planned_passes) == (3, 3)
        assert "pass 3 of 3" in str(app.status.render())
    counted = [(info.passes, info.planned_passes) for info in shown if info.passes]
    assert counted and all(planned is not None and passes <= planned for passes, planned in counted)
