"""Playback of a draft as it was written: scrub through a diffusion draft's passes or an AR draft's tokens, play and
pause, change speed, save or export the trace."""

from __future__ import annotations

from pathlib import Path

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import Footer, Label

from app.recording.export import export_trace
from app.recording.frames import step_unit, trace_frames
from app.storage.traces import save_trace
from engines.trace import Trace, TraceError
from ui.refinement import RefinementView
from ui.screens.dialogs import PathScreen

# Steps a second: a diffusion draft's passes, or an AR draft's tokens (dozens a second as it was written).
SPEEDS = {"passes": (1.0, 2.0, 5.0, 10.0, 20.0, 50.0), "tokens": (5.0, 10.0, 20.0, 50.0, 100.0, 200.0)}


class PlaybackScreen(Screen[None]):
    BINDINGS = [
        Binding("left", "step(-1)", "Back"),
        Binding("right", "step(1)", "Forward"),
        Binding("home", "jump(0)", "First"),
        Binding("end", "jump(-1)", "Last"),
        Binding("space", "toggle_play", "Play/pause"),
        Binding("plus,equals_sign", "speed(1)", "Faster"),
        Binding("minus", "speed(-1)", "Slower"),
        Binding("s", "save", "Save trace"),
        Binding("e", "export", "Export"),
        Binding("escape", "close", "Close"),
    ]

    def __init__(self, trace: Trace, save_dir: Path) -> None:
        super().__init__()
        self.trace = trace
        self.frames = trace_frames(trace)
        self.unit = step_unit(trace)
        self.save_dir = save_dir
        self.position = len(self.frames) - 1
        self.speed_index = 2
        self.timer: Timer | None = None

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(self._title(), id="playback-title", classes="title")
            with VerticalScroll():
                yield RefinementView(id="playback-view")
            yield Label("", id="playback-position")
        yield Footer()

    def _title(self) -> str:
        header = self.trace.header
        engine = " (AR, token by token)" if self.trace.engine == "ar" else ""
        return (
            f"Playback: {header.kind} by {header.model}{engine} · {header.canvas_length} tokens · "
            f"{header.prompt[:60]!r}"
        )

    @property
    def speed(self) -> float:
        return SPEEDS[self.unit][self.speed_index]

    def on_mount(self) -> None:
        self._show()

    def _show(self) -> None:
        if not self.frames:
            self.query_one("#playback-position", Label).update(f"this trace has no {self.unit}")
            return
        current = self.frames[self.position]
        self.query_one("#playback-view", RefinementView).current = current
        playing = "playing" if self.timer else "paused"
        self.query_one("#playback-position", Label).update(
            f"{current.step} · {current.elapsed_s:.2f} s · "
            f"{playing} at {self.speed:g} {self.unit}/s · ←/→ step · space play · +/- speed · s save · e export"
        )

    def action_step(self, delta: int) -> None:
        self._stop()
        self._move(delta)

    def _move(self, delta: int) -> bool:
        target = min(max(self.position + delta, 0), len(self.frames) - 1)
        moved = target != self.position
        self.position = target
        self._show()
        return moved

    def action_jump(self, where: int) -> None:
        self._stop()
        self.position = where if where >= 0 else len(self.frames) - 1
        self._show()

    def action_toggle_play(self) -> None:
        if self.timer:
            self._stop()
        else:
            if self.position >= len(self.frames) - 1:
                self.position = 0
            self.timer = self.set_interval(1 / self.speed, self._tick)
        self._show()

    def _tick(self) -> None:
        if not self._move(1):
            self._stop()
            self._show()

    def _stop(self) -> None:
        if self.timer:
            self.timer.stop()
            self.timer = None

    def action_speed(self, delta: int) -> None:
        self.speed_index = min(max(self.speed_index + delta, 0), len(SPEEDS[self.unit]) - 1)
        if self.timer:
            self._stop()
            self.timer = self.set_interval(1 / self.speed, self._tick)
        self._show()

    def _file_name(self) -> str:
        return self.trace.header.created.replace(":", "").replace("+", "_")

    def action_save(self) -> None:
        path = self.save_dir / f"trace-{self._file_name()}.jsonl"
        try:
            save_trace(self.trace, path)
        except TraceError as error:
            self.notify(str(error), severity="error")
            return
        self.notify(f"saved {path}")

    def action_export(self) -> None:
        """Ask where to write the trace shown as a recording: .cast (asciinema), .svg (animated) or .gif."""
        self._stop()
        self._show()
        what = "draft" if self.trace.engine == "ar" else "refinement"
        suggestion = self.save_dir / f"{what}-{self._file_name()}.svg"
        self.app.push_screen(
            PathScreen(f"Export the {what} to (.cast, .svg or .gif):", str(suggestion)), self._export_to
        )

    def _export_to(self, answer: str | None) -> None:
        if answer:
            self.export(Path(answer).expanduser())

    @work(thread=True, group="export", exit_on_error=False)
    def export(self, path: Path) -> None:
        """Write the recording in a thread (a GIF of a long draft takes a moment) and say where it went."""
        try:
            written = export_trace(self.trace, path)
        except TraceError as error:
            self.app.call_from_thread(self.notify, str(error), severity="error", timeout=10)
            return
        except Exception as error:  # a bug: said, not swallowed by the worker
            message = f"the export failed unexpectedly ({type(error).__name__}: {error})"
            self.app.call_from_thread(self.notify, message, severity="error", timeout=10)
            return
        self.app.call_from_thread(self.notify, f"exported {path} ({written / 1024:.1f} KB)")

    def action_close(self) -> None:
        self._stop()
        self.dismiss(None)
