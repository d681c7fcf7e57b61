"""Route llama.cpp's own log lines into Python logging, keeping the recent ones for error messages.

When llama.cpp refuses a model it says why only in its log ("unknown model architecture: 'x'");
llama-cpp-python then raises a bare "Failed to load model from file". Keeping the last lines lets the
engine put llama.cpp's reason into the error the user sees.
"""

from __future__ import annotations

import ctypes
import logging
import threading
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager

import llama_cpp

logger = logging.getLogger("sharpen.llama_cpp")
# Silent unless the application configures logging (`sharpen --verbose`).
logger.addHandler(logging.NullHandler())
logger.propagate = False

# ggml_log_level in the llama.cpp we pin: NONE 0, DEBUG 1, INFO 2, WARN 3, ERROR 4, CONT 5.
# (llama-cpp-python's own mapping predates that order.)
_LEVELS = {0: logging.INFO, 1: logging.DEBUG, 2: logging.INFO, 3: logging.WARNING, 4: logging.ERROR}
_CONTINUE = 5
_recent: deque[tuple[int, str]] = deque(maxlen=64)
_lock = threading.Lock()
_last_level = logging.DEBUG
_installed = False
# Lists that capture() hands out: each gets every line logged while it is open.
_captures: list[list[str]] = []


@llama_cpp.llama_log_callback
def _on_log(level: int, text: bytes, _user_data: ctypes.c_void_p) -> None:
    global _last_level
    line = text.decode("utf-8", errors="replace").rstrip("\n")
    py_level = _last_level if level == _CONTINUE else _LEVELS.get(level, logging.DEBUG)
    _last_level = py_level
    with _lock:
        _recent.append((py_level, line))
        for lines in _captures:
            lines.append(line)
    logger.log(py_level, "%s", line)


def install() -> None:
    """Take over llama.cpp's log callback (idempotent).

    The callback object lives at module level, so it is never garbage-collected under llama.cpp.
    """
    global _installed
    if not _installed:
        llama_cpp.llama_log_set(_on_log, ctypes.c_void_p(0))
        _installed = True


def clear() -> None:
    with _lock:
        _recent.clear()


@contextmanager
def capture() -> Iterator[list[str]]:
    """Every line llama.cpp logs while the block runs, whatever its level (install() first)."""
    lines: list[str] = []
    with _lock:
        _captures.append(lines)
    try:
        yield lines
    finally:
        with _lock:
            _captures.remove(lines)


def recent_problems() -> list[str]:
    """Warning and error lines logged since the last clear()."""
    with _lock:
        return [line.strip() for level, line in _recent if level >= logging.WARNING and line.strip()]
