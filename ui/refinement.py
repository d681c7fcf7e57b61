"""The refinement view: a draft's canvas drawn pass by pass, sharpening in place."""

from __future__ import annotations

from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from engines.events import Pass

MASK_GLYPH = "░"
# As in LLaDA's demo: the tokens committed in this pass, coloured by confidence.
LOW, MEDIUM = 0.3, 0.7


def confidence_style(confidence: float) -> str:
    if confidence < LOW:
        return "bold #ff5f5f"
    if confidence < MEDIUM:
        return "bold #ffaf00"
    return "bold #5fd75f"


def render_pass(event: Pass, highlight: bool = True) -> Text:
    """The canvas as text: masks as dim placeholders, this pass's commits coloured by confidence."""
    fresh = dict(zip(event.committed, event.confidences, strict=True)) if highlight else {}
    text = Text()
    for position, (piece, masked) in enumerate(zip(event.pieces, event.masked, strict=True)):
        if masked:
            text.append(MASK_GLYPH, style="dim")
        elif position in fresh:
            text.append(piece, style=confidence_style(fresh[position]))
        else:
            text.append(piece)
    return text


class RefinementView(Widget):
    """Shows one pass (or streamed AR text). Set `current` from the UI thread; it redraws itself."""

    DEFAULT_CSS = """
    RefinementView { height: auto; min-height: 3; padding: 0 1; }
    """

    current: reactive[Pass | None] = reactive(None, layout=True)
    streamed: reactive[str] = reactive("", layout=True)

    def render(self) -> Text:
        if self.current is not None:
            animate = self.app.animation_level != "none"
            return render_pass(self.current, highlight=animate)
        if self.streamed:
            return Text(self.streamed)
        return Text("waiting for the first pass…", style="dim italic")
