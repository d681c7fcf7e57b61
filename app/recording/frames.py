"""Refinement frames: what each pass of a draft shows, token by token, and the colour class of each token.

The one model of a drawn pass, shared by the TUI's refinement view (ui/refinement.py) and the exports of a
trace (app/recording/: asciicast, SVG, GIF), so their colours cannot drift apart. A masked
position shows a dim placeholder; a token committed in this pass is coloured by its confidence (under 0.3
red, under 0.7 orange, else green, as in LLaDA's demo); a token committed in an earlier pass is settled,
plain text. Plain Python: no UI library is imported here.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from engines.events import Pass

MASK_GLYPH = "░"
# Confidence buckets of the tokens committed in a pass: under LOW, under MEDIUM, the rest.
LOW, MEDIUM = 0.3, 0.7


class Mark(StrEnum):
    """The colour class of one canvas position in one pass."""

    MASKED = "masked"
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"
    SETTLED = "settled"

    @property
    def fresh(self) -> bool:
        """Committed in this pass."""
        return self in (Mark.LOW, Mark.MEDIUM, Mark.HIGH)


# The colours the TUI draws with (its dark theme, as in its snapshots), for the exports to draw with too.
CONFIDENCE_COLOURS = {Mark.LOW: "#ff5f5f", Mark.MEDIUM: "#ffaf00", Mark.HIGH: "#5fd75f"}
BACKGROUND = "#1e1e1e"
FOREGROUND = "#e0e0e0"
# How the TUI's "dim" foreground comes out on its background.
DIM_FOREGROUND = "#999999"

# Rich styles (the TUI draws with these; the asciicast's ANSI codes are rendered from them).
STYLES: dict[Mark, str] = {
    Mark.MASKED: "dim",
    **{mark: f"bold {colour}" for mark, colour in CONFIDENCE_COLOURS.items()},
    Mark.SETTLED: "",
}
# Explicit colours and weights (the SVG and the GIF draw with these).
COLOURS: dict[Mark, str] = {Mark.MASKED: DIM_FOREGROUND, **CONFIDENCE_COLOURS, Mark.SETTLED: FOREGROUND}
BOLD = frozenset({Mark.LOW, Mark.MEDIUM, Mark.HIGH})


def confidence_mark(confidence: float) -> Mark:
    if confidence < LOW:
        return Mark.LOW
    if confidence < MEDIUM:
        return Mark.MEDIUM
    return Mark.HIGH


@dataclass(frozen=True)
class Cell:
    """One canvas position as drawn: its text (the token's piece, or the mask glyph) and its class."""

    text: str
    mark: Mark
    # The commit's confidence, for a token committed in this pass.
    confidence: float | None = None


@dataclass(frozen=True)
class Frame:
    """One pass as drawn: a cell per canvas position."""

    index: int
    cells: tuple[Cell, ...]
    elapsed_s: float

    @property
    def text(self) -> str:
        """The text the pass shows, masks as placeholders."""
        return "".join(cell.text for cell in self.cells)


def frame(event: Pass, highlight: bool = True) -> Frame:
    """The pass as drawn; without `highlight`, this pass's commits are drawn as settled text."""
    fresh = dict(zip(event.committed, event.confidences, strict=True)) if highlight else {}
    cells: list[Cell] = []
    for position, (piece, masked) in enumerate(zip(event.pieces, event.masked, strict=True)):
        if masked:
            cells.append(Cell(MASK_GLYPH, Mark.MASKED))
        elif position in fresh:
            confidence = fresh[position]
            cells.append(Cell(piece, confidence_mark(confidence), confidence))
        else:
            cells.append(Cell(piece, Mark.SETTLED))
    return Frame(event.index, tuple(cells), event.elapsed_s)


def frames(passes: Iterable[Pass], highlight: bool = True) -> list[Frame]:
    return [frame(event, highlight) for event in passes]
