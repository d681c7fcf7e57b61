"""Saving refinement traces: atomically, so a crash never leaves half a trace behind."""

from __future__ import annotations

from pathlib import Path

from app.storage.atomic import write_atomic
from engines.trace import Trace, TraceError


def save_trace(trace: Trace, path: Path) -> None:
    try:
        write_atomic(path, trace.to_jsonl().encode("utf-8"))
    except OSError as error:
        raise TraceError(f"{path}: cannot write the trace ({error.strerror or error})") from None
