"""Draft frames: what each step of a draft shows, token by token, and the colour class of each token.

The one model of a drawn step, shared by the TUI's refinement view (ui/refinement.py) and the exports of a
trace (app/recording/: asciicast, SVG, GIF), so their colours cannot drift apart. A diffusion draft's step is
a pass: a masked position shows a dim placeholder; a token committed in this pass is coloured by its
confidence (under 0.3 red, under 0.7 orange, else green, as in LLaDA's demo); a token committed in an earlier
pass is settled, plain text. An AR draft's step is a token: the text written so far, left to right, the
newest token marked. Plain Python: no UI library is imported here.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from engines.events import Pass
from engines.trace import TokenArrival, Trace

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
    # The token an AR draft wrote in this step.
    WRITTEN = "written"
    # Words around a draft in a recording (a pane's title, the line between two drafts): no token of it.
    LABEL = "label"

    @property
    def fresh(self) -> bool:
        """Written or committed in this step."""
        return self in (Mark.LOW, Mark.MEDIUM, Mark.HIGH, Mark.WRITTEN)


# The colours the TUI draws with (its dark theme, as in its snapshots), for the exports to draw with too.
CONFIDENCE_COLOURS = {Mark.LOW: "#ff5f5f", Mark.MEDIUM: "#ffaf00", Mark.HIGH: "#5fd75f"}
# An AR draft's newest token: no confidence, so none of the confidence colours.
WRITTEN_COLOUR = "#5fafff"
BACKGROUND = "#1e1e1e"
FOREGROUND = "#e0e0e0"
# How the TUI's "dim" foreground comes out on its background.
DIM_FOREGROUND = "#999999"

# Rich styles (the TUI draws with these; the asciicast's ANSI codes are rendered from them).
STYLES: dict[Mark, str] = {
    Mark.MASKED: "dim",
    **{mark: f"bold {colour}" for mark, colour in CONFIDENCE_COLOURS.items()},
    Mark.SETTLED: "",
    Mark.WRITTEN: f"bold {WRITTEN_COLOUR}",
    Mark.LABEL: "dim",
}
# Explicit colours and weights (the SVG and the GIF draw with these).
COLOURS: dict[Mark, str] = {
    Mark.MASKED: DIM_FOREGROUND,
    **CONFIDENCE_COLOURS,
    Mark.SETTLED: FOREGROUND,
    Mark.WRITTEN: WRITTEN_COLOUR,
    Mark.LABEL: DIM_FOREGROUND,
}
BOLD = frozenset({Mark.LOW, Mark.MEDIUM, Mark.HIGH, Mark.WRITTEN})


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
    """One step as drawn: a cell per canvas position (a pass), or per token written so far (AR)."""

    index: int
    cells: tuple[Cell, ...]
    elapsed_s: float
    # Where the step is in the draft, as a recording's status line and playback say it ("pass 12 of 34",
    # "token 57 of 128"; "" for a pass drawn alone, as the live view draws it).
    step: str = ""

    @property
    def text(self) -> str:
        """The text the step shows, masks as placeholders."""
        return "".join(cell.text for cell in self.cells)

    def plain(self) -> Frame:
        """The frame with nothing marked as new in this step (drawing with animations off)."""
        cells = tuple(Cell(cell.text, Mark.SETTLED) if cell.mark.fresh else cell for cell in self.cells)
        return Frame(self.index, cells, self.elapsed_s, self.step)


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
    drawn = [frame(event, highlight) for event in passes]
    return [Frame(f.index, f.cells, f.elapsed_s, f"pass {f.index + 1} of {len(drawn)}") for f in drawn]


def written_frames(tokens: list[TokenArrival], total: int | None = None) -> list[Frame]:
    """An AR draft as it was written, a frame a token: the text so far, the newest token marked. `total` is the
    tokens the draft generated (text the engine held back, as it might have begun a stop string, arrives with a
    later token's, or after the last)."""
    total = total or (tokens[-1].index + 1 if tokens else 0)
    settled: list[Cell] = []
    drawn: list[Frame] = []
    for number, token in enumerate(tokens):
        step = f"token {min(token.index + 1, total)} of {total}"
        drawn.append(Frame(number, (*settled, Cell(token.text, Mark.WRITTEN)), token.elapsed_s, step))
        settled.append(Cell(token.text, Mark.SETTLED))
    return drawn


def trace_frames(trace: Trace) -> list[Frame]:
    """Every step of a traced draft, as drawn: its passes, or its tokens as they arrived."""
    if trace.engine == "ar":
        return written_frames(trace.tokens, trace.stats.generated_tokens if trace.stats is not None else None)
    return frames(trace.passes)


def step_unit(trace: Trace) -> str:
    """What one step of the draft is called, in the plural ("passes", "tokens")."""
    return "tokens" if trace.engine == "ar" else "passes"
