"""A recording written to a file in the format its extension names (`.cast`, `.svg` or `.gif`), atomically: a
trace's, or any other (two drafts side by side, side_by_side.py)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from app.recording.cast import render_cast
from app.recording.gif import render_gif
from app.recording.screens import ExportError, ExportOptions, Recording, recording
from app.recording.svg import render_svg
from app.storage.atomic import write_atomic
from engines.trace import Trace

RENDERERS: dict[str, Callable[[Recording, ExportOptions], bytes]] = {
    ".cast": render_cast,
    ".svg": render_svg,
    ".gif": render_gif,
}
FORMATS = tuple(RENDERERS)


def export_format(path: Path) -> str:
    """The format a path names (its extension); ExportError for one Sharpen does not write."""
    suffix = path.suffix.lower()
    if suffix not in FORMATS:
        named = f"{suffix!r}" if suffix else "no extension"
        raise ExportError(
            f"{path}: cannot export a recording to {named}: name a .cast (asciinema), .svg (animated) or .gif file"
        )
    return suffix


def export_trace(trace: Trace, path: Path, options: ExportOptions | None = None) -> int:
    """Write the trace's recording to `path` in the format its extension names; return the bytes written."""
    options = options or ExportOptions()
    export_format(path)  # before the work of laying the trace out
    return export_recording(recording(trace, options), path, options)


def export_recording(recorded: Recording, path: Path, options: ExportOptions) -> int:
    """Write a recording to `path` in the format its extension names; return the bytes written."""
    suffix = export_format(path)
    data = RENDERERS[suffix](recorded, options)
    try:
        write_atomic(path, data)
    except OSError as error:
        raise ExportError(f"{path}: cannot write the recording ({error.strerror or error})") from None
    return len(data)
