"""Two drafts of one request side by side on one timeline, as they happened: an AR draft's tokens on the left, a
diffusion draft's passes on the right, each from its own start (they ran one after the other), a frame each time
either changes. The first frame is both drafts before their first step (no text; every position masked); a
draft that has finished stays on its last frame, its time said, while the other goes on.

`sharpen compare --export FILE` writes it (`.cast`, `.svg` or `.gif`, through export.py)."""

from __future__ import annotations

from collections.abc import Sequence

from app.domain.figures import ENGINE_LABELS
from app.recording.frames import MASK_GLYPH, Cell, Frame, Mark, step_unit, trace_frames
from app.recording.screens import ExportError, ExportOptions, Pane, Recording, Run, Screen
from engines.trace import Trace

DIVIDER = " │ "


def side_by_side(traces: Sequence[Trace], options: ExportOptions, title: str) -> Recording:
    """Two traces of the same request (shown left and right in that order) as one recording at the speed they
    happened: `width` columns shared between two panes, a title row naming each draft, the status line last
    ("1.20 s · AR token 57 of 96 · diffusion pass 12 of 24")."""
    if len(traces) != 2 or any(trace.steps == 0 for trace in traces):
        raise ExportError("a side-by-side recording shows two drafts that each wrote something")
    layout = _Layout(options)
    steps = [trace_frames(trace) for trace in traces]
    shown = [_start(trace) for trace in traces]
    counts = [0, 0]
    screens: list[Screen] = []
    times: list[float] = []

    def draw(at: float) -> None:
        progress = [
            _done(trace) if count == len(frames) else f"{ENGINE_LABELS[trace.engine]} {frame.step}"
            for trace, frames, frame, count in zip(traces, steps, shown, counts, strict=True)
        ]
        status = f"{at:.2f} s · {' · '.join(progress)}"[: options.width]
        where = {f"{trace.engine}-{_step_name(trace)}": str(count) for trace, count in zip(traces, counts, strict=True)}
        screens.append(Screen(layout.rows(traces, shown), status, where))
        times.append(at)

    draw(0.0)
    # Every step of both drafts in the order it happened (a tie: the left draft's first), one frame a moment.
    events = sorted(
        (frame.elapsed_s, side, index) for side, frames in enumerate(steps) for index, frame in enumerate(frames)
    )
    for position, (at, side, index) in enumerate(events):
        shown[side], counts[side] = steps[side][index], index + 1
        if position + 1 == len(events) or events[position + 1][0] != at:
            draw(at)
    return Recording(title, traces[0].header.created, screens, times, times[-1] + options.hold_s)


class _Layout:
    """Two panes side by side below a title row: each scrolls on its own to keep its draft's new tokens in view."""

    def __init__(self, options: ExportOptions) -> None:
        left = (options.width - len(DIVIDER)) // 2
        self.widths = (left, options.width - len(DIVIDER) - left)
        self.columns = (0, left + len(DIVIDER))
        self.visible = max(options.height - 2, 1)
        self.panes = [Pane(width, self.visible) for width in self.widths]

    def rows(self, traces: Sequence[Trace], shown: Sequence[Frame]) -> tuple[tuple[Run, ...], ...]:
        laid = [pane.show(frame)[0] for pane, frame in zip(self.panes, shown, strict=True)]
        names = [f"{ENGINE_LABELS[trace.engine]} · {trace.header.model}" for trace in traces]
        rows = [self._row([_label(name, 0, width) for name, width in zip(names, self.widths, strict=True)])]
        for number in range(self.visible):
            rows.append(self._row([pane[number] if number < len(pane) else () for pane in laid]))
        return tuple(rows)

    def _row(self, sides: Sequence[tuple[Run, ...]]) -> tuple[Run, ...]:
        left, right = sides
        divider = _label(DIVIDER, self.widths[0], len(DIVIDER))
        return (*left, *divider, *(Run(run.column + self.columns[1], run.text, run.mark, run.cells) for run in right))


def _label(text: str, column: int, width: int) -> tuple[Run, ...]:
    text = text[:width]
    return (Run(column, text, Mark.LABEL, len(text)),) if text else ()


def _start(trace: Trace) -> Frame:
    """A draft before its first step: an AR draft has no text yet, a diffusion draft's canvas is all masks."""
    if trace.engine == "ar":
        return Frame(-1, (), 0.0, "waiting for its first token")
    return Frame(-1, (Cell(MASK_GLYPH, Mark.MASKED),) * trace.header.canvas_length, 0.0, "waiting for its first pass")


def _step_name(trace: Trace) -> str:
    return "token" if trace.engine == "ar" else "pass"


def _done(trace: Trace) -> str:
    """ "AR done: 96 tokens in 3.21 s"."""
    stats = trace.stats
    seconds = stats.total_s if stats is not None else trace.tokens[-1].elapsed_s if trace.tokens else 0.0
    count = stats.generated_tokens if stats is not None and trace.engine == "ar" else trace.steps
    return f"{ENGINE_LABELS[trace.engine]} done: {count} {step_unit(trace)} in {seconds:.2f} s"
