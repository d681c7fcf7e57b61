"""`sharpen calibrate`'s plot: each engine's estimated seconds against the draft length, drawn by plotext
in the terminal (or into an SVG through rich), with the lengths where the faster engine changes marked.

The figures come from the caller (app/cli/routing.py), computed by the router's own estimates; this module
only draws them. plotext takes 0.2 s to import and rich's console 0.05 s: both are imported when a plot is
drawn, so `sharpen`'s start-up stays light.
"""

from __future__ import annotations

import io
import math
import shutil
from dataclasses import dataclass
from typing import TextIO

SHORTEST = 16
LONGEST = 1024
# Sizes in terminal cells: the smallest plot that stays readable, the largest height worth taking, and the
# size used when the output is not a terminal (a pipe, a file, a test).
MIN_WIDTH, MIN_HEIGHT, MAX_HEIGHT = 60, 16, 40
PIPE_SIZE = PLOT_WIDTH, PLOT_HEIGHT = (100, 24)
# Distinct glyphs, so the curves tell apart without colour: block quadrants for AR, braille for diffusion.
MARKERS = {"ar": "hd", "diffusion": "braille"}
CROSSOVER_MARKER = "│"


@dataclass(frozen=True)
class Curve:
    engine: str  # "ar" or "diffusion"
    label: str
    seconds: tuple[float, ...]  # one per length of the chart


@dataclass(frozen=True)
class Crossover:
    tokens: int  # the first length at which the other engine is estimated faster
    label: str


@dataclass(frozen=True)
class CostChart:
    title: str
    lengths: tuple[int, ...]
    curves: tuple[Curve, ...]
    crossovers: tuple[Crossover, ...]
    note: str = ""  # a line of the legend where there is no crossover to mark


def sample_lengths(shortest: int = SHORTEST, longest: int = LONGEST, per_doubling: int = 16) -> tuple[int, ...]:
    """Whole lengths spread evenly on a log scale from `shortest` to `longest` (both included)."""
    steps = max(1, round(math.log2(longest / shortest) * per_doubling))
    return tuple(sorted({round(shortest * (longest / shortest) ** (i / steps)) for i in range(steps + 1)}))


def plot_size(stream: TextIO) -> tuple[int, int, bool]:
    """Width, height and whether to colour: the terminal's size (within sane bounds) when `stream` is one,
    else 100 x 24 without colour."""
    if not stream.isatty():
        return *PIPE_SIZE, False
    columns, lines = shutil.get_terminal_size(PIPE_SIZE)
    return max(MIN_WIDTH, columns), max(MIN_HEIGHT, min(MAX_HEIGHT, lines - 2)), True


def render(chart: CostChart, width: int, height: int, colour: bool) -> str:
    """The chart as text `width` columns by `height` rows (ANSI colours where `colour`)."""
    import plotext as plt  # type: ignore[import-untyped]  # plotext ships no type information

    figure = plt.figure
    figure.clear()  # the figure is plotext's one global: a second plot in the same process starts afresh
    plt.terminal.limit(False, False)
    figure.plot_size(width, height)
    figure.theme("simple" if colour else "colorless")
    xs = list(chart.lengths)
    for curve in chart.curves:
        figure.draw(figure.signal(xs, list(curve.seconds), marker=MARKERS[curve.engine]).lines().label(curve.label))
    top = max((s for curve in chart.curves for s in curve.seconds), default=1.0)
    middle = math.sqrt(chart.lengths[0] * chart.lengths[-1])  # the middle of the log-scaled axis
    labelled = 0
    for crossover in chart.crossovers:
        n = crossover.tokens
        line = figure.signal([n, n], [0.0, top], marker=CROSSOVER_MARKER).lines()
        if not crossover.label:  # one of several close together: drawn, not named
            figure.draw(line)
            continue
        figure.draw(line.label(crossover.label))
        # The length beside its line, on the side with room; a second one lower down.
        tag, alignment = (f" {n}", "left") if n <= middle else (f"{n} ", "right")
        figure.draw(figure.text(n, top * (0.6 - 0.15 * labelled), tag, alignment=alignment))
        labelled += 1
    if chart.note:  # a legend line: a blank marker on the first point of a curve (plotext needs a point)
        first = chart.curves[0].seconds[0] if chart.curves else 0.0
        figure.draw(figure.signal([chart.lengths[0]], [first], marker=" ").label(chart.note))
    figure.ruler("x").scale("log")
    figure.title(chart.title)
    figure.label("draft tokens (log scale)", "x")
    figure.label("seconds", "y")
    text: str = figure.build().string(colorless=not colour)
    return "\n".join(line.rstrip() for line in text.rstrip("\n").split("\n"))


def render_svg(chart: CostChart, width: int = PIPE_SIZE[0], height: int = PIPE_SIZE[1]) -> str:
    """The same plot, coloured, as an SVG document (rich draws the terminal's text and colours)."""
    from rich.console import Console
    from rich.text import Text

    ansi = render(chart, width, height, colour=True)
    console = Console(record=True, width=width, file=io.StringIO(), force_terminal=True, color_system="256")
    console.print(Text.from_ansi(ansi), no_wrap=True, overflow="crop")
    return console.export_svg(title="sharpen calibrate --show")
