"""The Sharpen TUI: an editor with ghost-text completions, animated drafts and refinement playback.

Everything slow runs in thread workers that talk back through messages; the UI thread only draws.
The UI reaches the engines only through SharpenService. The app lays the widgets out and wires keys and
commands to what owns each job: the draft panel a draft, DocumentFiles the document on disk.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from textual import on
from textual.actions import SkipAction
from textual.app import App, ComposeResult, SystemCommand
from textual.screen import Screen
from textual.theme import Theme
from textual.widgets import Footer, TextArea

from app.domain.draft_request import DraftRequest
from app.domain.reply import Reply
from app.errors import SharpenError
from app.service import SharpenService
from app.storage.config import ConfigError, set_value
from app.storage.draft_history import DraftHistory, PastDraft
from engines.cancel import CancelToken
from engines.trace import Trace, TraceError, load_trace
from router.request import EngineName, approximate_tokens
from ui.bindings import bindings, key_rows, keymap
from ui.document_files import DocumentFiles
from ui.draft_panel import DraftPanel
from ui.draft_run import DraftEnded, DraftRun
from ui.editor import SharpenEditor
from ui.find_bar import FindBar
from ui.requests import draft_at_cursor, rewrite_of_selection
from ui.screens.dialogs import DraftAsk, DraftPromptScreen, PathScreen, RewriteScreen
from ui.screens.help import HelpScreen
from ui.screens.history import HistoryScreen
from ui.screens.models import ModelsScreen
from ui.screens.playback import PlaybackScreen
from ui.status import StatusBar, StatusInfo, TextCounter, count_text


class SharpenApp(App[None]):
    CSS_PATH = "styles.tcss"
    TITLE = "Sharpen"
    BINDINGS = bindings("app")

    def __init__(self, service: SharpenService, document: Path | None = None, trace: Path | None = None) -> None:
        super().__init__()
        self.service = service
        self.trace_path = trace
        self.files = DocumentFiles(
            self,
            service.paths.state_dir,
            document,
            busy_drafting=self._busy_drafting,
            close_document_views=self._close_document_views,
        )
        self.history = DraftHistory(service.paths.state_dir / "drafts.sqlite3")
        self.counter = TextCounter()
        self._saved_theme = ""
        # The engine the writer chose last in a draft or rewrite dialog (None: the router's choice), for the session.
        self.draft_engine: EngineName | None = None

    # ----- layout and start-up -------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        ui = self.service.config.ui
        editor = SharpenEditor(
            self.complete_suggestion,
            id="editor",
            debounce_s=ui.debounce_ms / 1000,
            max_chars_right=ui.max_chars_right_of_cursor,
        )
        yield editor
        yield FindBar(editor, self.service.config.keys, id="find-bar")
        yield DraftPanel(self.service, self.show_status, id="draft-panel")
        yield StatusBar(id="status")
        yield Footer()

    @property
    def editor(self) -> SharpenEditor:
        return self.query_one("#editor", SharpenEditor)

    @property
    def find_bar(self) -> FindBar:
        return self.query_one("#find-bar", FindBar)

    @property
    def panel(self) -> DraftPanel:
        return self.query_one("#draft-panel", DraftPanel)

    @property
    def status(self) -> StatusBar:
        return self.query_one("#status", StatusBar)

    @property
    def draft(self) -> DraftRun | None:
        """The draft in the panel, refining or finished; None when the panel is closed."""
        return self.panel.run

    def show_status(self, **changes: Any) -> None:
        self.status.info = self.status.info.with_changes(**changes)

    def on_mount(self) -> None:
        self.set_keymap(keymap(self.service.config.keys))
        ui = self.service.config.ui
        self._apply_theme(ui.theme)
        self.editor.set_autocomplete(ui.autocomplete)
        self.status.info = StatusInfo(autocomplete=ui.autocomplete)
        self.files.start(self.editor, ui.autosave_s)
        if self.trace_path is not None:
            self._open_trace(self.trace_path)
        self.editor.focus()
        self.run_worker(self._remeasure_after_load, thread=True, group="calibration")

    def _remeasure_after_load(self) -> None:
        """Costs measured under load are measured again, in this worker, once the machine is idle."""
        said = self.service.remeasure_after_load()
        if said is not None:
            self.call_from_thread(self.notify, said, timeout=8)

    # ----- the document on disk (DocumentFiles does the work) ------------------------------------

    def action_save(self) -> None:
        self.files.save()

    def action_save_as(self) -> None:
        self._main_screen_only()
        self.files.save_as_dialog()

    def action_open(self) -> None:
        self._main_screen_only()
        self.files.open_dialog()

    def _main_screen_only(self) -> None:
        """The app's keys reach every screen: under a dialog, a key of the editor's screen is handed on."""
        if len(self.screen_stack) > 1:
            raise SkipAction()

    def _close_document_views(self) -> None:
        """Another document replaces this one: a finished draft and the find bar belong to the old one."""
        self.panel.close()
        if self.find_bar.is_open:
            self.find_bar.action_close()

    # ----- find and replace ----------------------------------------------------------------------

    def action_find(self) -> None:
        self._main_screen_only()
        self.find_bar.open(replace=False)

    def action_replace(self) -> None:
        self._main_screen_only()
        self.find_bar.open(replace=True)

    def action_find_next(self) -> None:
        self._find_step(self.find_bar.find_next)

    def action_find_previous(self) -> None:
        self._find_step(self.find_bar.find_previous)

    def _find_step(self, step: Callable[[], None]) -> None:
        """Step to a match; with the find bar closed, open it first."""
        self._main_screen_only()
        if self.find_bar.is_open:
            step()
        else:
            self.find_bar.open(replace=False)

    # ----- counts and theme ----------------------------------------------------------------------

    @on(TextArea.Changed, "#editor")
    def _count_document(self, event: TextArea.Changed) -> None:
        """Counted on each edit, not on each render: about 1 ms for a 1 MB document (only changed lines are
        split again)."""
        editor = event.text_area
        if not editor.is_attached:  # the app is closing
            return
        status = editor.screen.query_one("#status", StatusBar)
        status.info = status.info.with_changes(counts=self.counter.count(editor.document.lines))
        find_bar = editor.screen.query_one("#find-bar", FindBar)
        if find_bar.is_open:
            find_bar.refresh_matches()

    @on(TextArea.SelectionChanged, "#editor")
    def _count_selection(self, event: TextArea.SelectionChanged) -> None:
        editor = event.text_area
        if not editor.is_attached:
            return
        status = editor.screen.query_one("#status", StatusBar)
        selection = None if editor.selection.is_empty else count_text(editor.selected_text)
        if selection != status.info.selection:
            status.info = status.info.with_changes(selection=selection)

    def _apply_theme(self, name: str) -> None:
        """The theme config.toml names (ui.theme); a switch from the command palette is written back there."""
        if name in self.available_themes:
            self.theme = name
        else:
            self.notify(
                f"ui.theme = {name!r} is not one of Textual's themes; using {self.theme}. "
                "The command palette's Change theme lists them",
                severity="warning",
                timeout=10,
            )
        self._saved_theme = name
        self.theme_changed_signal.subscribe(self, self._theme_changed)

    def _theme_changed(self, theme: Theme) -> None:
        if theme.name == self._saved_theme:
            return
        self._saved_theme = theme.name
        path = self.service.paths.config_file
        self.run_worker(lambda: self._write_theme(path, theme.name), thread=True, group="config-write")

    def _write_theme(self, path: Path, name: str) -> None:
        try:
            set_value(path, "ui.theme", name)
        except ConfigError as error:
            self.call_from_thread(self.notify, f"the theme was not remembered: {error}", severity="error")

    def action_quit_saving(self) -> None:
        self.files.autosave()
        self.exit()

    def on_unmount(self) -> None:
        # The app is closing: a failed autosave must not turn a clean exit into a traceback.
        with contextlib.suppress(Exception):
            self.files.autosave()

    # ----- autocomplete --------------------------------------------------------------------------

    def complete_suggestion(self, prefix: str, suffix: str, cancel: CancelToken) -> str:
        """The editor's completer (it runs this in a thread)."""
        max_tokens = self.service.config.ui.suggestion_tokens
        return self.service.complete(prefix, suffix, max_tokens=max_tokens, cancel=cancel).text()

    def action_toggle_autocomplete(self) -> None:
        enabled = not self.editor.autocomplete
        self.editor.set_autocomplete(enabled)
        self.status.info = self.status.info.with_changes(autocomplete=enabled)
        self.notify(f"ghost-text autocomplete {'on' if enabled else 'off'}")

    # ----- drafts --------------------------------------------------------------------------------

    def action_draft(self) -> None:
        self._main_screen_only()
        self.ask_for_draft(self.draft_engine)

    def ask_for_draft(self, engine: EngineName | None) -> None:
        """The draft dialog, its engine field on `engine` (None: auto, the router's choice)."""
        if self._busy_drafting("a draft is already refining: esc cancels it"):
            return
        self.push_screen(DraftPromptScreen(self.service.config.diffusion.tokens, engine), self._draft_asked)

    def _draft_asked(self, ask: DraftAsk | None) -> None:
        if ask is None:
            return
        self.draft_engine = ask.engine
        request = draft_at_cursor(self.editor, ask.prompt, ask.tokens, ask.engine)
        self.start_draft(request, f"Draft: {ask.prompt[:70] or 'here'}")

    def action_rewrite(self) -> None:
        self._main_screen_only()
        editor = self.editor
        if editor.selection.is_empty:
            self.notify("select the text to rewrite first")
            return
        if self._busy_drafting("a draft is already refining: esc cancels it"):
            return
        self.push_screen(
            RewriteScreen(approximate_tokens(editor.selected_text), self.draft_engine), self._rewrite_asked
        )

    def _rewrite_asked(self, ask: DraftAsk | None) -> None:
        if ask is None or self.editor.selection.is_empty:
            return
        self.draft_engine = ask.engine
        label = f"Rewrite: {ask.prompt[:70]}" if ask.prompt else "Rewrite of the selection"
        self.start_draft(rewrite_of_selection(self.editor, ask.prompt, ask.tokens, ask.engine), label)

    def start_draft(self, request: DraftRequest, label: str) -> None:
        """Hand the request to the panel, which routes and refines it in a worker."""
        self.panel.start(request, label)

    def action_another_candidate(self) -> None:
        if not self.panel.another_candidate():
            raise SkipAction()

    def action_other_engine(self) -> None:
        """The shown draft's request asked of the other engine, as a candidate beside it."""
        if not self.panel.other_engine():
            raise SkipAction()

    def action_previous_candidate(self) -> None:
        if not self.panel.flip(-1):
            raise SkipAction()

    def action_next_candidate(self) -> None:
        if not self.panel.flip(+1):
            raise SkipAction()

    @on(DraftEnded)
    def keep_in_history(self, ended: DraftEnded) -> None:
        """Every finished draft goes into this document's history (in a worker: a trace can be megabytes)."""
        run = ended.run
        if run.state != "ready" or run.reply is None or run.request is None:
            return
        reply, document, instruction = run.reply, self.files.document, run.request.instruction
        self.run_worker(lambda: self._keep(document, reply, instruction), thread=True, group="history-write")

    def _keep(self, document: Path | None, reply: Reply, instruction: str) -> None:
        self.history.add(document, reply, instruction)
        self._warn_about_history()

    def _busy_drafting(self, message: str) -> bool:
        """Whether a draft is refining (said in a notification): one draft at a time."""
        if self.panel.refining:
            self.notify(message)
        return self.panel.refining

    def _warn_about_history(self) -> None:
        if self.history.warning:
            warning, self.history.warning = self.history.warning, ""
            self.call_from_thread(self.notify, warning, severity="warning", timeout=10)

    def action_draft_history(self) -> None:
        if self._busy_drafting("a draft is refining: esc cancels it"):
            return
        self.run_worker(self._open_history, thread=True, group="history-read", exclusive=True)

    def _open_history(self) -> None:
        drafts = self.history.drafts(self.files.document)
        self._warn_about_history()
        self.call_from_thread(self._show_history, drafts)

    def _show_history(self, drafts: list[PastDraft]) -> None:
        self.push_screen(HistoryScreen(drafts), self._past_chosen)

    def _past_chosen(self, past: PastDraft | None) -> None:
        if past is None:
            return
        self.run_worker(lambda: self._reopen(past), thread=True, group="history-read", exclusive=True)

    def _reopen(self, past: PastDraft) -> None:
        """In a worker: read the draft's trace (megabytes, for a long one), then show it."""
        loaded = self.history.with_trace(past)
        trace = loaded.trace()
        self._warn_about_history()
        self.call_from_thread(self._show_past, loaded, trace)

    def _show_past(self, past: PastDraft, trace: Trace | None) -> None:
        if self.panel.refining:  # a draft started while the list was open
            self.notify("a draft is refining: esc cancels it")
            return
        self.panel.show_past(past, trace)

    def action_cancel_draft(self) -> None:
        if self.panel.cancel() and self.panel.run is None:
            self.editor.focus()

    def action_accept_draft(self) -> None:
        finished = self.panel.finished_text()
        if finished is None:
            raise SkipAction()
        run, text = finished
        editor = self.editor
        # One step of undo: the edits before and after are kept out of the draft's.
        editor.history.checkpoint()
        if run.kind == "infill" and run.original_selection and editor.selected_text == run.original_selection:
            editor.replace(text, *sorted(editor.selection))
        else:
            editor.insert(text)
        editor.history.checkpoint()
        self.panel.close()
        editor.focus()

    # ----- playback, models, help ----------------------------------------------------------------

    def action_playback(self) -> None:
        trace = self.panel.last_trace
        if trace is None:
            self.notify("no draft to play back yet")
            return
        self.push_screen(PlaybackScreen(trace, self.service.paths.data_dir / "traces"))

    def _open_trace(self, path: Path) -> None:
        try:
            trace = load_trace(path)
        except TraceError as error:
            self.notify(str(error), severity="error", timeout=10)
            return
        self.panel.last_trace = trace
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
            name = self.service.use_model(role, name)
        except SharpenError as error:
            self.notify(str(error), severity="error", timeout=10)
            return
        self.editor.completions_failed = False  # the new model may complete where the old one failed
        serves = {"complete": "completions", "write": "AR drafts, rewrites and chat"}.get(role, "drafts")
        self.notify(f"{name} now serves {serves}")

    def action_help(self) -> None:
        self.push_screen(HelpScreen(key_rows(self.service.config.keys)))

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        yield SystemCommand("Draft at the cursor", "Write a draft with the engine chosen last", self.action_draft)
        yield SystemCommand(
            "Draft with diffusion",
            "Write a draft that refines pass by pass (the draft model), whatever the router would choose",
            lambda: self.ask_for_draft("diffusion"),
        )
        yield SystemCommand(
            "Draft with AR",
            "Write a draft token by token (the AR model), whatever the router would choose",
            lambda: self.ask_for_draft("ar"),
        )
        yield SystemCommand(
            "Draft with the router's choice",
            "Write a draft with the engine the router chooses, and see why",
            lambda: self.ask_for_draft(None),
        )
        yield SystemCommand(
            "Rewrite the selection", "With an instruction, or infill from both sides", self.action_rewrite
        )
        yield SystemCommand(
            "Past drafts", "Reopen, replay or insert a past draft of this document", self.action_draft_history
        )
        yield SystemCommand(
            "Play back the last draft", "Scrub through its passes, or an AR draft's tokens", self.action_playback
        )
        yield SystemCommand("Load a trace", "Play back a saved refinement trace", self.action_load_trace)
        yield SystemCommand("Toggle autocomplete", "Ghost-text completions on or off", self.action_toggle_autocomplete)
        yield SystemCommand("Models", "Which models are present and what they serve", self.action_models)
        yield SystemCommand("Keys", "Every key binding", self.action_help)
        yield SystemCommand("Save", "Save the document", self.files.save)
        yield SystemCommand("Save as", "Save the document under a new name", self.files.save_as_dialog)
        yield SystemCommand("Open a file", "Open a file, or one of the recent ones", self.files.open_dialog)
        yield SystemCommand("Find", "Find in the document", lambda: self.find_bar.open(replace=False))
        yield SystemCommand("Replace", "Find and replace in the document", lambda: self.find_bar.open(replace=True))
