"""A draft's frames (frames.py) laid out on a recording's grid of `width` columns and `height` rows: the text
wrapped as the editor wraps it, the status line last, a text taller than the grid scrolled to keep each step's
new tokens in view; and when each frame is shown (a Recording, which cast.py, svg.py and gif.py write)."""

from __future__ import annotations

import itertools
import unicodedata
from dataclasses import dataclass, field

from app.recording.frames import DIM_FOREGROUND, Frame, Mark, step_unit, trace_frames
from engines.trace import Trace, TraceError

DEFAULT_SPEED = 8.0
DEFAULT_WIDTH, DEFAULT_HEIGHT = 80, 24
HOLD_S = 2.0
TAB = 8
# The status line's style: as the TUI's dim text.
STATUS_STYLE = "dim"
STATUS_COLOUR = DIM_FOREGROUND


class ExportError(TraceError):
    """A trace that cannot be exported: a format Sharpen does not write, no passes, a write that failed."""


@dataclass(frozen=True)
class ExportOptions:
    # Steps a second (passes, or an AR draft's tokens); None: a diffusion draft at DEFAULT_SPEED passes a second,
    # an AR draft as it was written (each token when it arrived).
    speed: float | None = None
    width: int = DEFAULT_WIDTH  # columns
    height: int = DEFAULT_HEIGHT  # rows, the status line included
    hold_s: float = HOLD_S  # how long the last frame stays before the recording ends (or loops)


@dataclass(frozen=True)
class Run:
    """Characters of one class side by side on a row, from column `column`, `cells` columns wide."""

    column: int
    text: str
    mark: Mark
    cells: int


@dataclass(frozen=True)
class Screen:
    """One frame laid out: the rows in view (runs of one class) and the status line."""

    rows: tuple[tuple[Run, ...], ...]
    status: str
    # Where each draft shown is, for a reader of the recording (the SVG's data- attributes): {"pass": "3"}.
    steps: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Recording:
    """Screens and when each starts, in seconds; the last is held to `length`."""

    title: str
    created: str
    screens: list[Screen]
    times: list[float]
    length: float


def _glyphs(text: str) -> list[tuple[str, int]]:
    """The characters of a piece as the grid draws them, each with its width in cells: a newline as ("\\n", 0),
    a zero-width character joined to the one before, a tab as a space (expanded where it is placed), other
    control characters dropped (as the TUI's rich text drops them)."""
    from rich.cells import get_character_cell_size  # rich is imported when a recording is made, not with the CLI

    glyphs: list[tuple[str, int]] = []
    for char in text:
        if char == "\n":
            glyphs.append(("\n", 0))
        elif char == "\t":
            glyphs.append(("\t", 1))
        elif unicodedata.category(char) == "Cc":
            continue
        else:
            width = get_character_cell_size(char)
            if width == 0 and glyphs and glyphs[-1][1] > 0:
                glyphs[-1] = (glyphs[-1][0] + char, glyphs[-1][1])
            elif width > 0:
                glyphs.append((char, width))
    return glyphs


Glyph = tuple[str, Mark, int]  # a character (with any zero-width ones after it), its class, its width in cells


def layout(frame: Frame, width: int) -> list[list[Glyph]]:
    """The frame's text on rows of `width` columns, wrapped as the editor wraps it: at the text's newlines, and
    before a word that would pass the edge (a word longer than a row is broken where the row ends)."""
    lines: list[list[Glyph]] = [[]]
    for cell in frame.cells:
        for char, cells in _glyphs(cell.text):
            if char == "\n":
                lines.append([])
            else:
                lines[-1].append((char, cell.mark, cells))
    return [row for line in lines for row in _wrap(line, width)]


def _wrap(line: list[Glyph], width: int) -> list[list[Glyph]]:
    rows: list[list[Glyph]] = [[]]
    column = 0
    words = [list(group) for _, group in itertools.groupby(line, key=lambda glyph: glyph[0].isspace())]
    for word in words:
        if word[0][0].isspace():
            for char, mark, cells in word:
                spaces = TAB - column % TAB if char == "\t" else cells
                if column + spaces > width:  # whitespace where a row ends is not carried to the next
                    rows.append([])
                    column = 0
                    continue
                rows[-1].extend([(" ", mark, 1)] * spaces if char == "\t" else [(char, mark, cells)])
                column += spaces
            continue
        if column > 0 and column + sum(cells for _, _, cells in word) > width:
            rows.append([])
            column = 0
        for char, mark, cells in word:
            if column > 0 and column + cells > width:
                rows.append([])
                column = 0
            rows[-1].append((char, mark, min(cells, width)))
            column += cells
    return rows


def _runs(row: list[Glyph]) -> tuple[Run, ...]:
    runs: list[Run] = []
    column = 0
    for char, mark, cells in row:
        last = runs[-1] if runs else None
        if last is not None and last.mark == mark:
            runs[-1] = Run(last.column, last.text + char, mark, last.cells + cells)
        else:
            runs.append(Run(column, char, mark, cells))
        column += cells
    return tuple(runs)


class Pane:
    """Frames laid out one after another in `width` columns and `visible` rows: a text taller than that scrolls to
    keep each step's new tokens in view, from where the frame before left it."""

    def __init__(self, width: int, visible: int) -> None:
        self.width = width
        self.visible = max(visible, 1)
        self.top = 0

    def show(self, frame: Frame) -> tuple[tuple[tuple[Run, ...], ...], str]:
        """The frame's rows in view, and which lines those are where the text does not fit (" · lines 3-24 of
        30"; "" where it fits)."""
        rows = layout(frame, self.width)
        visible, top = self.visible, self.top
        fresh = [number for number, row in enumerate(rows) if any(mark.fresh for _, mark, _ in row)]
        if fresh and fresh[-1] >= top + visible:
            top = fresh[-1] - visible + 1
        if fresh and fresh[0] < top:
            top = fresh[0]
        self.top = top = min(max(top, 0), max(len(rows) - visible, 0))
        lines = f" · lines {top + 1}-{min(top + visible, len(rows))} of {len(rows)}" if len(rows) > visible else ""
        return tuple(_runs(row) for row in rows[top : top + visible]), lines


def screens(trace: Trace, options: ExportOptions) -> list[Screen]:
    """Every step laid out on the grid; a text taller than the grid scrolls to keep the step's new tokens in view."""
    drawn = trace_frames(trace)
    if not drawn:
        raise ExportError(f"the trace has no {step_unit(trace)} to export")
    pane = Pane(options.width, options.height - 1)
    step = "token" if trace.engine == "ar" else "pass"
    result: list[Screen] = []
    for number, frame in enumerate(drawn, start=1):
        rows, lines = pane.show(frame)
        status = f"{frame.step} · {frame.elapsed_s:.2f} s{lines}"
        result.append(Screen(rows, status[: options.width], {step: str(number)}))
    return result


def recording(trace: Trace, options: ExportOptions) -> Recording:
    """The trace's recording: at `options.speed` steps a second, or at its own pace (see ExportOptions)."""
    laid_out = screens(trace, options)
    if options.speed is None and trace.engine == "ar":
        times, length = real_times([token.elapsed_s for token in trace.tokens], options)
    else:
        times, length = frame_times(len(laid_out), options)
    return Recording(title(trace), trace.header.created, laid_out, times, length)


def frame_times(count: int, options: ExportOptions) -> tuple[list[float], float]:
    """When each frame starts at `options.speed` frames a second (DEFAULT_SPEED where it is None), in seconds,
    and the recording's length (the last frame held `hold_s`)."""
    speed = options.speed or DEFAULT_SPEED
    times = [index / speed for index in range(count)]
    return times, times[-1] + options.hold_s


def real_times(elapsed: list[float], options: ExportOptions) -> tuple[list[float], float]:
    """Frames shown when they happened (the first from the start), and the recording's length."""
    times = [0.0, *elapsed[1:]]
    return times, times[-1] + options.hold_s


def title(trace: Trace) -> str:
    header = trace.header
    engine = " (AR, token by token)" if trace.engine == "ar" else ""
    return f"Sharpen: {header.kind} by {header.model}{engine} · {header.canvas_length} tokens · {header.prompt[:60]!r}"
