"""The refinement view: a draft's canvas drawn pass by pass, sharpening in place (or an AR draft's text token by
token, in playback)."""

from __future__ import annotations

from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from app.recording.frames import STYLES, Frame, frame
from engines.events import Pass


def render_pass(event: Pass, highlight: bool = True) -> Text:
    """The canvas as text: masks as dim placeholders, this pass's commits coloured by confidence
    (the frame model in app/recording/frames.py, which the trace exports draw too)."""
    return render_frame(frame(event, highlight))


def render_frame(drawn: Frame) -> Text:
    text = Text()
    for cell in drawn.cells:
        text.append(cell.text, style=STYLES[cell.mark])
    return text


class RefinementView(Widget):
    """Shows one pass, or one step of a draft played back (a Frame), or streamed AR text. Set `current` from the UI
    thread; it redraws itself."""

    DEFAULT_CSS = """
    RefinementView { height: auto; min-height: 3; padding: 0 1; }
    """

    current: reactive[Pass | Frame | None] = reactive(None, layout=True)
    streamed: reactive[str] = reactive("", layout=True)

    def render(self) -> Text:
        current = self.current
        if current is not None:
            animate = self.app.animation_level != "none"
            if isinstance(current, Frame):
                return render_frame(current if animate else current.plain())
            return render_pass(current, highlight=animate)
        if self.streamed:
            return Text(self.streamed)
        return Text("waiting for the first pass…", style="dim italic")
