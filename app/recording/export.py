"""Recordings of a refinement trace: an asciicast (`.cast`), an animated SVG (`.svg`) or a GIF (`.gif`).

Each pass is one frame, drawn from the frame model the TUI draws with (app/domain/refinement_frames.py):
masks as dim placeholders, this pass's commits coloured by confidence, settled text plain. The text is
laid out on a grid of `width` columns (wrapped as the editor wraps it) and `height` rows,
the last of which says which pass this is; a text taller than the grid scrolls to keep this pass's commits
in view. Frames follow each other at `speed` passes a second and the last is held `hold_s` seconds.

- `.cast`: asciicast v2 (asciinema's format): a JSON header line, then one `[time, "o", data]` event a
  pass that clears the screen and redraws it with ANSI colours (the rich styles the TUI uses).
- `.svg`: one self-contained SVG whose frames are `<g>` groups shown in turn by CSS `@keyframes` (no
  script, so it plays in a browser and in a GitHub README), looping.
- `.gif`: a frame a pass, drawn with PIL in a monospace font (DejaVu Sans Mono where the system has it,
  otherwise PIL's own scalable font, each character placed on the grid).

Files are written atomically.
"""

from __future__ import annotations

import io
import itertools
import json
import math
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias
from xml.sax.saxutils import escape

from app.domain.refinement_frames import BACKGROUND, BOLD, COLOURS, DIM_FOREGROUND, STYLES, Frame, Mark, frames
from app.storage.atomic import write_atomic
from engines.diffusion.trace import Trace, TraceError

if TYPE_CHECKING:
    from PIL import Image, ImageDraw, ImageFont

FORMATS = (".cast", ".svg", ".gif")
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
    speed: float = DEFAULT_SPEED  # passes a second
    width: int = DEFAULT_WIDTH  # columns
    height: int = DEFAULT_HEIGHT  # rows, the status line included
    hold_s: float = HOLD_S  # how long the last pass stays before the recording ends (or loops)


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


def export_format(path: Path) -> str:
    """The format a path names (its extension); ExportError for one Sharpen does not write."""
    suffix = path.suffix.lower()
    if suffix not in FORMATS:
        named = f"{suffix!r}" if suffix else "no extension"
        raise ExportError(
            f"{path}: cannot export a trace to {named}: name a .cast (asciinema), .svg (animated) or .gif file"
        )
    return suffix


def export_trace(trace: Trace, path: Path, options: ExportOptions | None = None) -> int:
    """Write the trace's recording to `path` in the format its extension names; return the bytes written."""
    suffix = export_format(path)
    data = RENDERERS[suffix](trace, options or ExportOptions())
    try:
        write_atomic(path, data)
    except OSError as error:
        raise ExportError(f"{path}: cannot write the recording ({error.strerror or error})") from None
    return len(data)


# Laying the frames out on the grid.


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


def screens(trace: Trace, options: ExportOptions) -> list[Screen]:
    """Every pass laid out on the grid; a text taller than the grid scrolls to keep the pass's commits in view."""
    drawn = frames(trace.passes)
    if not drawn:
        raise ExportError("the trace has no passes to export")
    visible = max(options.height - 1, 1)
    top = 0
    result: list[Screen] = []
    for frame in drawn:
        rows = layout(frame, options.width)
        fresh = [number for number, row in enumerate(rows) if any(mark.fresh for _, mark, _ in row)]
        if fresh and fresh[-1] >= top + visible:
            top = fresh[-1] - visible + 1
        if fresh and fresh[0] < top:
            top = fresh[0]
        top = min(max(top, 0), max(len(rows) - visible, 0))
        status = f"pass {frame.index + 1} of {len(drawn)} · {frame.elapsed_s:.2f} s"
        if top > 0 or top + visible < len(rows):
            status += f" · lines {top + 1}-{min(top + visible, len(rows))} of {len(rows)}"
        result.append(Screen(tuple(_runs(row) for row in rows[top : top + visible]), status[: options.width]))
    return result


def frame_times(count: int, options: ExportOptions) -> tuple[list[float], float]:
    """When each frame starts, in seconds, and the recording's length (the last frame held `hold_s`)."""
    times = [index / options.speed for index in range(count)]
    return times, times[-1] + options.hold_s


def title(trace: Trace) -> str:
    header = trace.header
    return f"Sharpen: {header.kind} by {header.model} · {header.canvas_length} tokens · {header.prompt[:60]!r}"


# asciicast v2


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


# Animated SVG

FONT_SIZE = 14
CELL_WIDTH = FONT_SIZE * 0.6  # a monospace font's advance
LINE_HEIGHT = FONT_SIZE * 1.25
PADDING = 10
FONT_FAMILY = "'DejaVu Sans Mono', 'Menlo', 'Consolas', 'Liberation Mono', monospace"
# The class each mark is drawn with in the SVG.
SVG_CLASSES = {Mark.MASKED: "m", Mark.LOW: "l", Mark.MEDIUM: "o", Mark.HIGH: "h", Mark.SETTLED: "s"}
STATUS_CLASS = "st"


def _number(value: float) -> str:
    return f"{value:.2f}".rstrip("0").rstrip(".")


def _percent(value: float) -> str:
    return f"{value:.4f}".rstrip("0").rstrip(".") + "%"


def render_svg(trace: Trace, options: ExportOptions) -> bytes:
    drawn = screens(trace, options)
    times, length = frame_times(len(drawn), options)
    width = 2 * PADDING + options.width * CELL_WIDTH
    height = 2 * PADDING + options.height * LINE_HEIGHT
    css = [
        f"text{{font-family:{FONT_FAMILY};font-size:{FONT_SIZE}px;white-space:pre}}",
        *(
            f".{SVG_CLASSES[mark]}{{fill:{COLOURS[mark]}{';font-weight:bold' if mark in BOLD else ''}}}"
            for mark in Mark
        ),
        f".{STATUS_CLASS}{{fill:{STATUS_COLOUR}}}",
        ".frame{opacity:0}.last{opacity:1}",
    ]
    if len(drawn) > 1:
        for index, start in enumerate(times):
            end = times[index + 1] if index + 1 < len(times) else length
            first, shown_until = 100 * start / length, 100 * end / length
            steps = [("0%", 1 if index == 0 else 0)]
            if index > 0:
                steps.append((_percent(first), 1))
            if index + 1 < len(times):
                steps.append((_percent(shown_until), 0))
            steps.append(("100%", 1 if index + 1 == len(times) else 0))
            keyframes = "".join(f"{at}{{opacity:{opacity}}}" for at, opacity in steps)
            css.append(f"@keyframes k{index}{{{keyframes}}}")
            css.append(f".f{index}{{animation:k{index} {_number(length)}s steps(1,end) infinite}}")
        css.append("@media (prefers-reduced-motion:reduce){.frame{animation:none}}")
    parts = [
        '<svg xmlns="http://www.w3.org/2000/svg" xml:space="preserve" '
        f'width="{_number(width)}" height="{_number(height)}" viewBox="0 0 {_number(width)} {_number(height)}">',
        f"<title>{escape(title(trace))}</title>",
        f"<style>{''.join(css)}</style>",
        f'<rect width="100%" height="100%" rx="6" fill="{BACKGROUND}"/>',
    ]
    for index, screen in enumerate(drawn):
        last = " last" if index + 1 == len(drawn) else ""
        parts.append(f'<g class="frame f{index}{last}" data-pass="{index + 1}">')
        for number, row in enumerate(screen.rows):
            y = _number(PADDING + number * LINE_HEIGHT + FONT_SIZE)
            for run in row:
                if run.mark == Mark.SETTLED and not run.text.strip():
                    continue  # nothing to see
                parts.append(
                    f'<text class="{SVG_CLASSES[run.mark]}" x="{_number(PADDING + run.column * CELL_WIDTH)}" y="{y}" '
                    f'textLength="{_number(run.cells * CELL_WIDTH)}" lengthAdjust="spacingAndGlyphs">'
                    f"{escape(run.text)}</text>"
                )
        if options.height > 1:
            y = _number(PADDING + (options.height - 1) * LINE_HEIGHT + FONT_SIZE)
            parts.append(f'<text class="{STATUS_CLASS}" x="{PADDING}" y="{y}">{escape(screen.status)}</text>')
        parts.append("</g>")
    parts.append("</svg>")
    return ("\n".join(parts) + "\n").encode("utf-8")


# GIF

GIF_FONT_SIZE = 16
GIF_PADDING = 8
MONOSPACE_FONTS = ("DejaVuSansMono.ttf", "LiberationMono-Regular.ttf", "Menlo.ttc", "consola.ttf")
MONOSPACE_BOLD_FONTS = ("DejaVuSansMono-Bold.ttf", "LiberationMono-Bold.ttf", "consolab.ttf")
Font: TypeAlias = "ImageFont.FreeTypeFont | ImageFont.ImageFont"


def _truetype(names: Sequence[str], size: int) -> Font | None:
    from PIL import ImageFont

    for name in names:
        try:
            return ImageFont.truetype(name, size)
        except OSError:
            continue
    return None


def gif_fonts(size: int = GIF_FONT_SIZE) -> tuple[Font, Font, bool]:
    """Regular and bold fonts, and whether they are monospace: the system's DejaVu Sans Mono (or another
    monospace font) where it has one, else PIL's own font (scalable where PIL has FreeType: Pillow 10.1 on)."""
    from PIL import ImageFont

    regular = _truetype(MONOSPACE_FONTS, size)
    if regular is None:
        default = ImageFont.load_default(size=size)
        return default, default, False
    return regular, _truetype(MONOSPACE_BOLD_FONTS, size) or regular, True


def _rgb(colour: str) -> tuple[int, int, int]:
    return int(colour[1:3], 16), int(colour[3:5], 16), int(colour[5:7], 16)


def gif_durations(count: int, options: ExportOptions) -> list[int]:
    """Each frame's duration in milliseconds: one pass at `speed`, the last held `hold_s`."""
    return [round(1000 / options.speed)] * (count - 1) + [round(options.hold_s * 1000)]


def render_gif(trace: Trace, options: ExportOptions) -> bytes:
    from PIL import Image, ImageDraw

    drawn = screens(trace, options)
    regular, bold, monospace = gif_fonts()
    # A monospace font's own advance (characters of a run drawn together land on the grid); for PIL's own
    # (proportional) font, a monospace font's usual advance, each character centred on its cell.
    cell_width = regular.getlength("M") if monospace else GIF_FONT_SIZE * 0.6
    line_height = round(GIF_FONT_SIZE * 1.3)
    size = (
        math.ceil(2 * GIF_PADDING + options.width * cell_width),
        2 * GIF_PADDING + options.height * line_height,
    )
    images: list[Image.Image] = []
    for screen in drawn:
        image = Image.new("RGB", size, _rgb(BACKGROUND))
        draw = ImageDraw.Draw(image)
        for number, row in enumerate(screen.rows):
            y = GIF_PADDING + number * line_height
            for run in row:
                x = GIF_PADDING + run.column * cell_width
                colour = _rgb(COLOURS[run.mark])
                if run.mark == Mark.MASKED:
                    _shade(draw, round(x), y, round(run.cells * cell_width), line_height, colour)
                else:
                    font = bold if run.mark in BOLD else regular
                    _text(draw, (x, y), run.text, font, colour, None if monospace else cell_width)
        if options.height > 1:
            y = GIF_PADDING + (options.height - 1) * line_height
            status_colour = _rgb(STATUS_COLOUR)
            _text(draw, (GIF_PADDING, y), screen.status, regular, status_colour, None if monospace else cell_width)
        images.append(image)
    out = io.BytesIO()
    images[0].save(
        out,
        format="GIF",
        save_all=True,
        append_images=images[1:],
        duration=gif_durations(len(images), options),
        loop=0,
    )
    return out.getvalue()


def _text(
    draw: ImageDraw.ImageDraw,
    at: tuple[float, float],
    text: str,
    font: Font,
    colour: tuple[int, int, int],
    cell_width: float | None,
) -> None:
    """Draw a run; with `cell_width` (a proportional font), each character on its own cell."""
    if cell_width is None:
        draw.text(at, text, fill=colour, font=font)
        return
    from rich.cells import get_character_cell_size

    x, y = at
    for char in text:
        cell = cell_width * max(get_character_cell_size(char[0]), 1)
        draw.text((x + (cell - font.getlength(char)) / 2, y), char, fill=colour, font=font)
        x += cell


def _shade(draw: ImageDraw.ImageDraw, x: int, y: int, width: int, height: int, colour: tuple[int, int, int]) -> None:
    """The mask glyph (a light shade) drawn as a sparse grid of dots, the same whatever the font has."""
    draw.point(
        [
            (px, py)
            for py in range(y + 2, y + height - 2, 2)
            for px in range(x + 1 + (py // 2 % 2) * 2, x + width - 1, 4)
        ],
        fill=colour,
    )


RENDERERS: dict[str, Callable[[Trace, ExportOptions], bytes]] = {
    ".cast": render_cast,
    ".svg": render_svg,
    ".gif": render_gif,
}
