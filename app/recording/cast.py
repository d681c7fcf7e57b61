"""A recording as an asciicast v2 (asciinema's format): a JSON header line, then one `[time, "o", data]` event a
frame that clears the screen and redraws it with ANSI colours (the rich styles the TUI uses)."""

from __future__ import annotations

import json
from datetime import datetime

from app.recording.frames import STYLES
from app.recording.screens import STATUS_STYLE, ExportOptions, Recording, Run


def _ansi(text: str, style: str) -> str:
    from rich.color import ColorSystem
    from rich.style import Style

    return Style.parse(style).render(text, color_system=ColorSystem.TRUECOLOR)


CLEAR = "\x1b[2J\x1b[H"
HIDE_CURSOR, SHOW_CURSOR = "\x1b[?25l", "\x1b[?25h"


def render_cast(recording: Recording, options: ExportOptions) -> bytes:
    header = {
        "version": 2,
        "width": options.width,
        "height": options.height,
        "timestamp": _timestamp(recording.created),
        "title": recording.title,
        "env": {"TERM": "xterm-256color"},
    }
    lines = [json.dumps(header, ensure_ascii=False)]
    length = recording.length
    for index, (screen, time) in enumerate(zip(recording.screens, recording.times, strict=True)):
        rows = [_row(row) for row in screen.rows]
        padding = [""] * (options.height - 1 - len(rows))
        data = (HIDE_CURSOR if index == 0 else "") + CLEAR + "\r\n".join([*rows, *padding])
        data += "\r\n" + _ansi(screen.status, STATUS_STYLE) if options.height > 1 else ""
        lines.append(json.dumps([round(time, 6), "o", data], ensure_ascii=False))
    lines.append(json.dumps([round(length, 6), "o", "\r\n" + SHOW_CURSOR]))
    return ("\n".join(lines) + "\n").encode("utf-8")


def _row(runs: tuple[Run, ...]) -> str:
    """A row's runs in their colours, spaces where no run is (between two panes side by side)."""
    drawn, column = "", 0
    for run in runs:
        drawn += " " * max(run.column - column, 0) + _ansi(run.text, STYLES[run.mark])
        column = run.column + run.cells
    return drawn


def _timestamp(created: str) -> int:
    try:
        return int(datetime.fromisoformat(created).timestamp())
    except ValueError:
        return 0
