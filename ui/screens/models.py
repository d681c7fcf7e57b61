"""F2: the models Sharpen knows, which are present and fit, which serves what; pull and switch. Below the
catalogue, the GGUFs found in other tools' stores (Ollama, LM Studio, models.folders, the HF cache), used in place.

Pulls run in a worker thread through the same service as `sharpen models pull` (g: `--gguf`, a block-causal
checkpoint ready for llama.cpp, its download and conversion on the one bar); progress reaches the screen as
posted messages, at most one per percent, so a fast download never floods the UI thread.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import DataTable, Label, ProgressBar

from app.errors import SharpenError
from app.orchestration.gguf_pulls import pull_gguf
from app.service import SharpenService
from models.found.stores import FoundModel
from models.gguf_pull import StageProgress, converts_to_gguf
from models.hub import PullProgress, PullResult


@dataclass
class PullUpdate(Message):
    event: PullProgress


@dataclass
class TwinUpdate(Message):
    """A pulled diffusion GGUF's cacheable twin being written (models/gguf_twin.py)."""

    name: str
    done: int
    total: int


@dataclass
class StageUpdate(Message):
    """A pull ready for llama.cpp moving along its one bar."""

    event: StageProgress


@dataclass
class PullFinished(Message):
    name: str
    done: str | None  # what the pull did, or None if it failed
    error: str | None


class ModelsScreen(ModalScreen[tuple[str, str] | None]):
    """Dismisses with (role, model name) when the user picks a model for a role."""

    BINDINGS = [
        Binding("escape,f2", "close", "Close"),
        Binding("c", "use('complete')", "Use for completions"),
        Binding("w", "use('write')", "Use for drafts, rewrites and chat through the AR engine"),
        Binding("d", "use('draft')", "Use for drafts"),
        Binding("p", "pull", "Pull from the Hub"),
        Binding("g", "pull(True)", "Pull ready for llama.cpp (SDAR, Fast-dLLM v2: download and convert)"),
    ]

    def __init__(self, service: SharpenService) -> None:
        super().__init__()
        self.service = service
        self.models = service.models.statuses()
        # GGUFs in Ollama's store, LM Studio's folders, models.folders and the HF cache, below the catalogue.
        self.found = service.models.found_models()[0]
        self.pulling: str | None = None
        self._last_percent = -1

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog wide"):
            yield Label(
                "Models · c: complete · w: write · d: draft · p: pull · g: pull as GGUF · esc: close", classes="title"
            )
            table: DataTable[str] = DataTable(cursor_type="row", id="models")
            table.add_columns("name", "role", "engine", "size", "fits", "used")
            yield table
            yield Label("", id="found-detail")
            yield ProgressBar(total=100, show_eta=False, id="pull-progress")
            yield Label("", id="pull-status")
            models = self.service.config.models
            writer = self.service.engines.writing_model
            writing = models.write or (
                f"{writer} (models.write is empty: the writing adapter for {models.complete})"
                if writer != models.complete
                else f"{models.complete} (models.write is empty: the complete model writes)"
            )
            yield Label(f"AR drafts, rewrites and chat: {writing}", id="write-model")
            draft = models.draft or "none configured (drafts go to the AR model)"
            yield Label(f"Drafts: {draft}", id="draft-model")

    def on_mount(self) -> None:
        self.query_one("#pull-progress").display = False
        self.query_one("#found-detail").display = False
        self._fill()

    def _fill(self) -> None:
        table = self.query_one("#models", DataTable)
        row = table.cursor_row
        table.clear()
        for model in self.models:
            fits = "yes" if model.fit.fits else "no"
            serves = "yes" if model.in_use_for else ""
            table.add_row(model.name, model.entry.role, model.runs_on, model.size_label, fits, serves, key=model.name)
        for found in self.found:
            runs_as = found.verdict.label if found.verdict.runs_as else "cannot run"
            serves = "yes" if self.service.models.in_use_for(found.name) else ""
            size = f"{found.info.file_size / 1e6:,.0f} MB"
            table.add_row(found.name, runs_as, found.store_label, size, "", serves, key=found.name)
        if table.row_count:
            table.move_cursor(row=min(row, table.row_count - 1))

    def _highlighted(self) -> str | None:
        table = self.query_one("#models", DataTable)
        if not table.row_count:
            return None
        row_key, _ = table.coordinate_to_cell_key(table.cursor_coordinate)
        return str(row_key.value)

    def action_use(self, role: str) -> None:
        name = self._highlighted()
        if name is None:
            return
        found = next((m for m in self.found if m.name == name), None)
        if found is not None and found.verdict.runs_as is None:
            self.notify(f"{name} cannot run: {found.verdict.reason}", severity="error", timeout=10)
            return
        self.dismiss((role, name))

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        """A found model's facts under the table: architecture, quantization, context, or why it cannot run."""
        found = next((m for m in self.found if m.name == str(event.row_key.value)), None)
        label = self.query_one("#found-detail", Label)
        label.display = found is not None
        if found is not None:
            info, why = found.info, found.verdict.reason
            context = f"context {info.context_length:,}" if info.context_length else "context unknown"
            facts = f"{info.architecture}, {info.file_type or 'quantization unknown'}, {context}"
            label.update(f"{found.store_label}: {facts}" + (f" · {why}" if why else ""))

    def _found(self, name: str) -> FoundModel:
        return next(m for m in self.found if m.name == name)

    def action_pull(self, gguf: bool = False) -> None:
        name = self._highlighted()
        if name is None:
            return
        if self.pulling is not None:
            self.notify(f"{self.pulling} is still downloading", severity="warning")
            return
        model = next((m for m in self.models if m.name == name), None)
        if model is None:
            self.notify(f"{name} is found on this machine ({self._found(name).store_label}): nothing to pull")
            return
        if not model.entry.is_hub:
            self.notify(f"{name} is part of Sharpen or a local file: nothing to pull")
            return
        if gguf and not converts_to_gguf(model.entry):
            self.notify(f"{name} is no SDAR or Fast-dLLM v2 checkpoint: p pulls it as it is", severity="warning")
            return
        self.pulling = name
        self._last_percent = -1
        self.query_one("#pull-progress", ProgressBar).update(total=100, progress=0)
        self.query_one("#pull-progress").display = True
        self.query_one("#pull-status", Label).update(f"pulling {name}…")
        if gguf:
            self._pull_gguf(name)
        else:
            self._pull(name)

    @work(thread=True, exclusive=True, group="pull")
    def _pull_gguf(self, name: str) -> None:
        def report(event: StageProgress) -> None:
            percent = int(100 * event.share)
            if percent != self._last_percent:
                self._last_percent = percent
                self.post_message(StageUpdate(event))

        try:
            pulled = pull_gguf(self.service.models, name, progress=report)
        except SharpenError as error:
            self.post_message(PullFinished(name, None, str(error)))
            return
        self.post_message(PullFinished(name, f"ready for llama.cpp ({pulled.gguf.name}), checked", None))

    @work(thread=True, exclusive=True, group="pull")
    def _pull(self, name: str) -> None:
        def report(event: PullProgress) -> None:
            percent = int(100 * event.done_bytes / event.total_bytes) if event.total_bytes else 0
            if percent != self._last_percent:
                self._last_percent = percent
                self.post_message(PullUpdate(event))

        def twin(done: int, total: int) -> None:
            percent = int(100 * done / total) if total else 100
            if percent != self._last_percent:
                self._last_percent = percent
                self.post_message(TwinUpdate(name, done, total))

        try:
            result = self.service.models.pull(name, progress=report, twin_progress=twin)
        except SharpenError as error:
            self.post_message(PullFinished(name, None, str(error)))
            return
        self.post_message(PullFinished(name, _fetched(result) + ", verified", None))

    def on_pull_update(self, message: PullUpdate) -> None:
        event = message.event
        bar = self.query_one("#pull-progress", ProgressBar)
        if event.total_bytes:
            bar.update(total=event.total_bytes, progress=event.done_bytes)
        self.query_one("#pull-status", Label).update(
            f"pulling {event.model}: {event.file} ({event.file_index}/{event.file_count}), "
            f"{event.done_bytes / 1e6:,.1f} of {(event.total_bytes or 0) / 1e6:,.1f} MB"
        )

    def on_stage_update(self, message: StageUpdate) -> None:
        event = message.event
        self.query_one("#pull-progress", ProgressBar).update(total=100, progress=round(100 * event.share))
        self.query_one("#pull-status", Label).update(f"{event.model}: {event.detail}")

    def on_twin_update(self, message: TwinUpdate) -> None:
        self.query_one("#pull-progress", ProgressBar).update(total=message.total, progress=message.done)
        self.query_one("#pull-status", Label).update(
            f"{message.name}: writing its cacheable copy for the cache, "
            f"{message.done / 1e6:,.1f} of {message.total / 1e6:,.1f} MB"
        )

    def on_pull_finished(self, message: PullFinished) -> None:
        self.pulling = None
        status = self.query_one("#pull-status", Label)
        if message.error is not None:
            self.query_one("#pull-progress").display = False
            status.update(f"{message.name}: {message.error}")
            self.notify(message.error, severity="error", timeout=10)
            return
        status.update(f"{message.name}: {message.done} — press c or d to use it")
        self.models = self.service.models.statuses()
        self._fill()

    def action_close(self) -> None:
        self.dismiss(None)


def _fetched(result: PullResult) -> str:
    return "downloaded" if result.downloaded_files else "already in the cache"
