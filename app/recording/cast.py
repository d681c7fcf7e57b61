"""A recording as an asciicast v2 (asciinema's format): a JSON header line, then one `[time, "o", data]` event a
pass that clears the screen and redraws it with ANSI colours (the rich styles the TUI uses)."""

from __future__ import annotations

import json
from datetime import datetime

from app.recording.frames import STYLES
from app.recording.screens import STATUS_STYLE, ExportOptions, frame_times, screens, title
from engines.diffusion.trace import Trace


def _ansi(text: str, style: str) -> str:
    from rich.color import ColorSystem
    from rich.style import Style

    return Style.parse(style).render(text, color_system=ColorSystem.TRUECOLOR)


CLEAR = "\x1b[2J\x1b[H"
HIDE_CURSOR, SHOW_CURSOR = "\x1b[?25l", "\x1b[?25h"


def render_cast(trace: Trace, options: ExportOptions) -> bytes:
    drawn = screens(trace, options)
    times, length = frame_times(len(drawn), options)
    created = _timestamp(trace.header.created)
    header = {
        "version": 2,
        "width": options.width,
        "height": options.height,
        "timestamp": created,
        "title": title(trace),
        "env": {"TERM": "xterm-256color"},
    }
    lines = [json.dumps(header, ensure_ascii=False)]
    for index, (screen, time) in enumerate(zip(drawn, times, strict=True)):
        rows = ["".join(_ansi(run.text, STYLES[run.mark]) for run in row) for row in screen.rows]
        padding = [""] * (options.height - 1 - len(rows))
        data = (HIDE_CURSOR if index == 0 else "") + CLEAR + "\r\n".join([*rows, *padding])
        data += "\r\n" + _ansi(screen.status, STATUS_STYLE) if options.height > 1 else ""
        lines.append(json.dumps([round(time, 6), "o", data], ensure_ascii=False))
    lines.append(json.dumps([round(length, 6), "o", "\r\n" + SHOW_CURSOR]))
    return ("\n".join(lines) + "\n").encode("utf-8")


def _timestamp(created: str) -> int:
    try:
        return int(datetime.fromisoformat(created).timestamp())
    except ValueError:
        return 0
