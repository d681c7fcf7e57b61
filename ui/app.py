"""The Sharpen TUI: an editor with ghost-text completions, animated drafts and refinement playback.

Everything slow runs in thread workers that talk back through messages; the UI thread only draws.
The UI reaches the engines only through SharpenService.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from textual import on
from textual.actions import SkipAction
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import Footer

from app.config import KeysSection, settings_registry
from app.documents import DocumentError, DocumentStore
from app.service import SharpenError, SharpenService
from engines.cancel import CancelToken
from engines.diffusion.settings import DiffusionSettings
from engines.diffusion.trace import Trace, TraceError, load_trace
from engines.events import Done, DraftStats, Event, Pass, Token
from router.request import Kind, Request, Route, approximate_tokens
from ui.draft_panel import DraftPanel
from ui.editor import SharpenEditor
from ui.messages import DraftFailed, DraftFinished, DraftPass, DraftStarted, DraftText, SuggestionReady
from ui.screens.dialogs import DraftAsk, DraftPromptScreen, PathScreen, RecoveryScreen
from ui.screens.help import HelpScreen
from ui.screens.models import ModelsScreen
from ui.screens.playback import PlaybackScreen
from ui.status import StatusBar, StatusInfo

# (binding id after "sharpen.", its key under [keys] in config.toml, action, footer label, in the footer)
APP_KEYS: tuple[tuple[str, str, str, str, bool], ...] = (
    ("draft", "draft", "draft", "Draft", True),
    ("rewrite", "rewrite", "rewrite", "Rewrite", True),
    ("accept_draft", "accept_draft", "accept_draft", "Insert draft", False),
    ("playback", "playback", "playback", "Playback", True),
    ("toggle_autocomplete", "toggle_autocomplete", "toggle_autocomplete", "Ghost on/off", False),
    ("save", "save", "save", "Save", True),
    ("models", "models", "models", "Models", False),
    ("help", "help", "help", "Keys", True),
    ("quit", "quit", "quit_saving", "Quit", False),
    ("cancel_draft", "dismiss", "cancel_draft", "Cancel draft", False),
)
# The editor's own bindings (ui/editor.py) use these ids and keys.
EDITOR_KEYS = ("accept_suggestion", "accept_word", "dismiss")
DEFAULT_KEYS = KeysSection()


@dataclass
class DraftRun:
    kind: Kind
    prompt: str
    route: Route
    settings: DiffusionSettings | None
    original_selection: str
    cancel: CancelToken = field(default_factory=CancelToken)
    # Appended by the worker thread; the UI shows the newest one.
    passes: list[Pass] = field(default_factory=list)
    # True while a DraftPass message is queued: the worker then only appends, so a fast model
    # never floods the UI thread with more frames than it can draw (the newest pass wins).
    frame_queued: bool = False
    text: str = ""
    done: Done | None = None
    started: float = field(default_factory=time.perf_counter)


class SharpenApp(App[None]):
    CSS_PATH = "styles.tcss"
    TITLE = "Sharpen"
    # Priority: the editor (a TextArea) binds some of these keys itself (ctrl+d deletes right, ctrl+y
    # redoes). Actions that do not apply raise SkipAction, which hands the key back to the editor.
    # Esc stays an ordinary binding so that the editor's "dismiss the suggestion" comes first.
    BINDINGS = [
        Binding(
            getattr(DEFAULT_KEYS, key), action, label, show=show, id=f"sharpen.{name}", priority=name != "cancel_draft"
        )
        for name, key, action, label, show in APP_KEYS
    ]

    def __init__(self, service: SharpenService, document: Path | None = None, trace: Path | None = None) -> None:
        super().__init__()
        self.service = service
        self.document = document
        self.trace_path = trace
        self.store = DocumentStore(service.paths.state_dir / "autosave")
        self.saved_text = ""
        self.autosaved_text = ""
        self.draft: DraftRun | None = None
        self.last_trace: Trace | None = None
        self._complete_cancel = CancelToken()
        self._debounce: Timer | None = None
        self._complete_failed = False

    # ----- layout and start-up -------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield SharpenEditor(id="editor", max_chars_right=self.service.config.ui.max_chars_right_of_cursor)
        yield DraftPanel(id="draft-panel")
        yield StatusBar(id="status")
        yield Footer()

    @property
    def editor(self) -> SharpenEditor:
        return self.query_one("#editor", SharpenEditor)

    @property
    def panel(self) -> DraftPanel:
        return self.query_one("#draft-panel", DraftPanel)

    @property
    def status(self) -> StatusBar:
        return self.query_one("#status", StatusBar)

    def on_mount(self) -> None:
        self.set_keymap(self.keymap())
        ui = self.service.config.ui
        self.editor.set_autocomplete(ui.autocomplete)
        self.status.info = StatusInfo(autocomplete=ui.autocomplete)
        self.sub_title = str(self.document) if self.document else "untitled"
        if self.document is not None:
            try:
                self.saved_text = self.store.load(self.document)
            except DocumentError as error:
                self.notify(str(error), severity="error", timeout=10)
                self.document = None
        self.editor.load_text(self.saved_text)
        self.autosaved_text = self.saved_text
        self.set_interval(ui.autosave_s, self.autosave)
        recovery = self.store.recovery(self.document)
        if recovery is not None:
            name = self.document.name if self.document else "an untitled document"
            self.push_screen(
                RecoveryScreen(name, recovery.saved_at[:19].replace("T", " ")), self._recover(recovery.text)
            )
        if self.trace_path is not None:
            self._open_trace(self.trace_path)
        self.editor.focus()

    def keymap(self) -> dict[str, str]:
        keys = self.service.config.keys
        mapping = {f"sharpen.{name}": getattr(keys, key) for name, key, *_ in APP_KEYS}
        return mapping | {f"sharpen.{name}": getattr(keys, name) for name in EDITOR_KEYS}

    def _recover(self, text: str) -> Callable[[bool | None], None]:
        def answer(recover: bool | None) -> None:
            if recover:
                self.editor.load_text(text)
                self.notify("recovered the autosaved text")
            else:
                self.store.discard_autosave(self.document)

        return answer

    # ----- autosave and saving -------------------------------------------------------------------

    def autosave(self) -> None:
        text = self.editor.text
        if text == self.autosaved_text:
            return
        self.autosaved_text = text
        if text == self.saved_text:
            self.store.discard_autosave(self.document)
            return
        try:
            self.store.autosave(self.document, text)
        except OSError as error:
            self.notify(f"autosave failed: {error}", severity="error")

    def action_save(self) -> None:
        if self.document is None:
            self.push_screen(PathScreen("Save as:"), self._save_as)
            return
        self._save_to(self.document)

    def _save_as(self, path: str | None) -> None:
        if path:
            self._save_to(Path(path).expanduser())

    def _save_to(self, path: Path) -> None:
        text = self.editor.text
        try:
            if self.document != path:
                self.store.discard_autosave(self.document)
            self.store.save(path, text)
        except DocumentError as error:
            self.notify(str(error), severity="error", timeout=10)
            return
        self.document = path
        self.saved_text = self.autosaved_text = text
        self.sub_title = str(path)
        self.notify(f"saved {path}")

    def action_quit_saving(self) -> None:
        self.autosave()
        self.exit()

    def on_unmount(self) -> None:
        self._complete_cancel.cancel()
        if self.draft is not None:
            self.draft.cancel.cancel()
        # The app is closing: a failed autosave must not turn a clean exit into a traceback.
        with contextlib.suppress(Exception):
            self.autosave()

    # ----- autocomplete --------------------------------------------------------------------------

    @on(SharpenEditor.SuggestionWanted)
    def schedule_completion(self, message: SharpenEditor.SuggestionWanted) -> None:
        self._complete_cancel.cancel()
        if self._debounce is not None:
            self._debounce.stop()
        delay = self.service.config.ui.debounce_ms / 1000
        self._debounce = self.set_timer(delay, lambda: self._start_completion(message))

    def _start_completion(self, message: SharpenEditor.SuggestionWanted) -> None:
        if message.request_id != self.editor.request_id or self._complete_failed:
            return
        cancel = CancelToken()
        self._complete_cancel = cancel
        self.run_worker(
            lambda: self._complete(message, cancel), thread=True, group="complete", exclusive=True, exit_on_error=False
        )

    def _complete(self, message: SharpenEditor.SuggestionWanted, cancel: CancelToken) -> None:
        try:
            events = self.service.complete(
                message.prefix,
                message.suffix,
                max_tokens=self.service.config.ui.suggestion_tokens,
                cancel=cancel,
            )
            done = next(e for e in events if isinstance(e, Done))
        except SharpenError as error:
            self._complete_failed = True
            self.call_from_thread(self.notify, f"autocomplete is off: {error}", severity="error", timeout=10)
            return
        if done.stats.finish_reason != "cancelled":
            self.post_message(SuggestionReady(message.request_id, message.prefix, done.text))

    @on(SuggestionReady)
    def show_suggestion(self, message: SuggestionReady) -> None:
        self.editor.offer(message.request_id, message.prefix, message.completion)

    def action_toggle_autocomplete(self) -> None:
        enabled = not self.editor.autocomplete
        self.editor.set_autocomplete(enabled)
        self._complete_failed = False
        self.status.info = self.status.info.but(autocomplete=enabled)
        self.notify(f"ghost-text autocomplete {'on' if enabled else 'off'}")

    # ----- drafts --------------------------------------------------------------------------------

    def action_draft(self) -> None:
        if self.draft is not None and self.draft.done is None:
            self.notify("a draft is already refining: esc cancels it")
            return
        self.push_screen(DraftPromptScreen(self.service.config.diffusion.tokens), self._draft_asked)

    def _draft_asked(self, ask: DraftAsk | None) -> None:
        if ask is not None:
            self.start_draft("draft", ask.prompt, "", ask.tokens)

    def action_rewrite(self) -> None:
        editor = self.editor
        if editor.selection.is_empty:
            self.notify("select the text to rewrite first")
            return
        if self.draft is not None and self.draft.done is None:
            self.notify("a draft is already refining: esc cancels it")
            return
        start, end = sorted(editor.selection)
        before = editor.get_text_range((0, 0), start)
        after = editor.get_text_range(end, editor.document.end)
        tokens = max(8, round(approximate_tokens(editor.selected_text) * 1.25))
        self.start_draft("infill", before, after, tokens)

    def start_draft(self, kind: Kind, prompt: str, after: str, tokens: int) -> None:
        """Route the request, open the panel, and refine in a thread worker."""
        request = Request(
            kind=kind,
            output_tokens=tokens,
            prompt_tokens=approximate_tokens(prompt),
            suffix_tokens=approximate_tokens(after),
            quality=self.service.config.router.quality,
        )
        try:
            route = self.service.route(request)
        except SharpenError as error:
            self.notify(str(error), severity="error", timeout=10)
            return
        settings = None
        if route.engine == "diffusion":
            settings = self.service.settings_for_route(route, self.service.diffusion_settings())
        run = DraftRun(kind, prompt, route, settings, self.editor.selected_text)
        self.draft = run
        label = "Rewrite of the selection" if kind == "infill" else f"Draft: {prompt[:70]}"
        self.panel.open(f"{label} · {tokens} tokens")
        self.post_message(DraftStarted(route.engine, route.model, route.reason, tokens))
        self.run_worker(lambda: self._refine(run, after, tokens), thread=True, group="draft", exit_on_error=False)

    def _refine(self, run: DraftRun, after: str, tokens: int) -> None:
        service, cancel = self.service, run.cancel
        try:
            events: Iterator[Event]
            if run.route.engine == "diffusion":
                events = (
                    service.draft(run.prompt, tokens, run.settings, cancel=cancel)
                    if run.kind == "draft"
                    else service.infill(run.prompt, after, tokens, run.settings, cancel=cancel)
                )
            elif run.kind == "draft":
                events = service.chat(run.prompt, max_tokens=tokens, cancel=cancel)
            else:
                events = service.complete(run.prompt, after, max_tokens=tokens, cancel=cancel)
            text, count = "", 0
            for event in events:
                if isinstance(event, Pass):
                    run.passes.append(event)
                    if not run.frame_queued:
                        run.frame_queued = True
                        self.post_message(DraftPass(event))
                elif isinstance(event, Token):
                    text, count = text + event.text, count + 1
                    self.post_message(DraftText(text, count, time.perf_counter() - run.started))
                else:
                    self.post_message(DraftFinished(event))
        except SharpenError as error:
            self.post_message(DraftFailed(str(error)))

    @on(DraftStarted)
    def _draft_started(self, message: DraftStarted) -> None:
        planned = None
        if self.draft and self.draft.settings and self.draft.settings.threshold is None:
            planned = self.draft.settings.steps
        self.status.info = self.status.info.but(
            engine=message.engine,
            model=message.model,
            reason=message.reason,
            state="drafting",
            passes=0,
            planned_passes=planned,
            tokens=0,
            tokens_per_s=0.0,
            elapsed_s=0.0,
        )

    @on(DraftPass)
    def _draft_pass(self, _message: DraftPass) -> None:
        run = self.draft
        if run is None:
            return
        run.frame_queued = False
        event = run.passes[-1]
        self.panel.view.current = event
        settled = len(event.masked) - sum(event.masked)
        self.status.info = self.status.info.but(
            passes=event.index + 1,
            tokens=settled,
            elapsed_s=event.elapsed_s,
            tokens_per_s=settled / event.elapsed_s if event.elapsed_s > 0 else 0.0,
        )

    @on(DraftText)
    def _draft_text(self, message: DraftText) -> None:
        if self.draft is None:
            return
        self.draft.text = message.text
        self.panel.view.streamed = message.text
        self.status.info = self.status.info.but(
            tokens=message.tokens,
            elapsed_s=message.elapsed_s,
            tokens_per_s=message.tokens / message.elapsed_s if message.elapsed_s > 0 else 0.0,
        )

    @on(DraftFinished)
    def _draft_finished(self, message: DraftFinished) -> None:
        run = self.draft
        if run is None:
            return
        run.done = message.done
        if run.passes:
            self.panel.view.current = run.passes[-1]
        stats = message.done.stats
        if isinstance(stats, DraftStats) and run.settings is not None:
            self.last_trace = self.service.build_trace(run.prompt, run.kind, run.settings, run.passes, message.done)
            tokens, passes = stats.generated_tokens, stats.passes
        else:
            tokens, passes = stats.generated_tokens, 0
        if not run.passes:
            self.panel.view.streamed = message.done.text
        if stats.finish_reason == "cancelled":
            self.panel.hint("cancelled · esc closes")
            state = "cancelled"
        else:
            playback = " · f5 plays the passes back" if run.passes else ""
            self.panel.hint(f"ctrl+enter / ctrl+y inserts · esc drops{playback}")
            state = "draft ready"
        self.status.info = self.status.info.but(
            state=state,
            tokens=tokens,
            passes=passes or self.status.info.passes,
            elapsed_s=stats.total_s,
            tokens_per_s=tokens / stats.total_s if stats.total_s > 0 else 0.0,
        )

    @on(DraftFailed)
    def _draft_failed(self, message: DraftFailed) -> None:
        self.notify(message.error, severity="error", timeout=10)
        self.panel.hint("failed · esc closes")
        if self.draft is not None:
            self.draft.done = Done("", DraftStats(0, 0, 0, 0, 0.0, 0.0, "cancelled"))
        self.status.info = self.status.info.but(state="draft failed")

    def action_cancel_draft(self) -> None:
        run = self.draft
        if run is None:
            return
        if run.done is None:
            run.cancel.cancel()
            self.panel.hint("cancelling…")
            return
        self.draft = None
        self.panel.close()
        self.status.info = self.status.info.but(state="ready")
        self.editor.focus()

    def action_accept_draft(self) -> None:
        run = self.draft
        if run is None or run.done is None or run.done.stats.finish_reason == "cancelled":
            raise SkipAction()
        editor = self.editor
        text = run.done.text
        if run.kind == "infill" and editor.selected_text == run.original_selection:
            editor.replace(text, *sorted(editor.selection))
        else:
            editor.insert(text)
        self.draft = None
        self.panel.close()
        self.status.info = self.status.info.but(state="ready")
        editor.focus()

    # ----- playback, models, help ----------------------------------------------------------------

    def action_playback(self) -> None:
        if self.last_trace is None:
            self.notify("no diffusion draft to play back yet")
            return
        self.push_screen(PlaybackScreen(self.last_trace, self.service.paths.data_dir / "traces"))

    def _open_trace(self, path: Path) -> None:
        try:
            trace = load_trace(path)
        except TraceError as error:
            self.notify(str(error), severity="error", timeout=10)
            return
        self.last_trace = trace
        self.push_screen(PlaybackScreen(trace, self.service.paths.data_dir / "traces"))

    def action_load_trace(self) -> None:
        self.push_screen(
            PathScreen("Trace to play back:"), lambda p: self._open_trace(Path(p).expanduser()) if p else None
        )

    def action_models(self) -> None:
        screen = ModelsScreen(self.service)
        self.push_screen(screen, self._use_model)

    def _use_model(self, choice: tuple[str, str] | None) -> None:
        if choice is None:
            return
        role, name = choice
        try:
            self.service.use_model(role, name)
        except SharpenError as error:
            self.notify(str(error), severity="error", timeout=10)
            return
        self._complete_failed = False
        self.notify(f"{name} now serves {'completions' if role == 'complete' else 'drafts'}")

    def action_help(self) -> None:
        registry = settings_registry()
        keys = self.service.config.keys
        rows = [(name, getattr(keys, name), registry[f"keys.{name}"].help) for name in type(keys).__dataclass_fields__]
        self.push_screen(HelpScreen(rows))

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        yield SystemCommand("Draft at the cursor", "Write a draft with the router's engine", self.action_draft)
        yield SystemCommand("Rewrite the selection", "Infill conditioned on both sides", self.action_rewrite)
        yield SystemCommand("Play back the last draft", "Scrub through its refinement passes", self.action_playback)
        yield SystemCommand("Load a trace", "Play back a saved refinement trace", self.action_load_trace)
        yield SystemCommand("Toggle autocomplete", "Ghost-text completions on or off", self.action_toggle_autocomplete)
        yield SystemCommand("Models", "Which models are present and what they serve", self.action_models)
        yield SystemCommand("Keys", "Every key binding", self.action_help)
        yield SystemCommand("Save", "Save the document", self.action_save)
