"""The refinement view: a draft's canvas drawn pass by pass, sharpening in place."""

from __future__ import annotations

from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from app.recording.frames import STYLES, frame
from engines.events import Pass


def render_pass(event: Pass, highlight: bool = True) -> Text:
    """The canvas as text: masks as dim placeholders, this pass's commits coloured by confidence
    (the frame model in app/recording/frames.py, which the trace exports draw too)."""
    text = Text()
    for cell in frame(event, highlight).cells:
        text.append(cell.text, style=STYLES[cell.mark])
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
