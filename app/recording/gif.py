"""A recording as a GIF: a picture a frame, drawn with PIL in a monospace font (DejaVu Sans Mono where the system
has it, otherwise PIL's own scalable font, each character placed on the grid). A frame shown for less than a
GIF can hold (20 ms: browsers slow shorter ones down) is left out, its time given to the frame before it."""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, TypeAlias

from app.recording.frames import BACKGROUND, BOLD, COLOURS, Mark
from app.recording.screens import STATUS_COLOUR, ExportOptions, Recording, Screen

if TYPE_CHECKING:
    from PIL import Image, ImageDraw, ImageFont


GIF_FONT_SIZE = 16
# The shortest time a GIF shows a picture for as asked (browsers show shorter ones for 100 ms).
SHORTEST_MS = 20
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


def gif_pictures(recording: Recording) -> list[tuple[Screen, int]]:
    """The screens a GIF shows, each with its duration in milliseconds (the last held to the recording's end); a
    screen shown for less than SHORTEST_MS is left out, its time given to the one before it."""
    times = [*recording.times, recording.length]
    kept: list[tuple[Screen, float]] = []
    for screen, start, end in zip(recording.screens, times, times[1:], strict=False):
        duration = (end - start) * 1000
        if kept and kept[-1][1] < SHORTEST_MS:
            kept[-1] = (screen, kept[-1][1] + duration)  # the one before was too short to be seen: this replaces it
        else:
            kept.append((screen, duration))
    return [(screen, round(duration)) for screen, duration in kept]


def render_gif(recording: Recording, options: ExportOptions) -> bytes:
    from PIL import Image, ImageDraw

    pictures = gif_pictures(recording)
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
    for screen, _ in pictures:
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
        duration=[duration for _, duration in pictures],
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
