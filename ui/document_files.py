"""The editor's document on disk: open, save, save as, the periodic autosave, recovering an autosave, and the
recent files.

DocumentFiles owns the document's state (its path, the text last saved and the text last autosaved) and the
stores that keep it. The app makes it, hands it the editor on mount and wires its keys and commands to it;
two callbacks from the app say whether a draft is refining (no file is opened then) and close what belongs to
the old document before a new one replaces it. Opening a file and the recent-files list are read and written
in thread workers.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from textual.app import App

from app.storage.documents import DocumentError, DocumentStore, Recovery
from app.storage.recent_files import RecentFiles
from ui.editor import SharpenEditor
from ui.screens.dialogs import ConfirmScreen, PathScreen, RecoveryScreen
from ui.screens.files import OpenFileScreen, UnsavedChoice, UnsavedScreen

# Whether a draft is refining, said in a notification with the message given.
BusyCheck = Callable[[str], bool]


class DocumentFiles:
    """The open document's file, its autosave and the recent files, for one app."""

    def __init__(
        self,
        app: App[Any],
        state_dir: Path,
        document: Path | None,
        *,
        busy_drafting: BusyCheck,
        close_document_views: Callable[[], None],
    ) -> None:
        self.app = app
        self.document = document
        self.store = DocumentStore(state_dir / "autosave")
        self.recent_files = RecentFiles(state_dir / "recent_files.json")
        self.saved_text = ""
        self.autosaved_text = ""
        self._busy_drafting = busy_drafting
        self._close_document_views = close_document_views
        self._editor: SharpenEditor | None = None

    @property
    def editor(self) -> SharpenEditor:
        if self._editor is None:
            raise RuntimeError("DocumentFiles.start has not been given the editor yet")
        return self._editor

    def start(self, editor: SharpenEditor, autosave_s: float) -> None:
        """On mount: load the document into the editor, start the autosave timer, and offer back an autosave
        newer than the file."""
        self._editor = editor
        self.app.sub_title = str(self.document) if self.document else "untitled"
        if self.document is not None:
            try:
                self.saved_text, note = self.store.load(self.document)
                if note:
                    self.app.notify(note, severity="warning", timeout=15)
            except DocumentError as error:
                self.app.notify(str(error), severity="error", timeout=10)
                self.document = None
        editor.use_language_of(self.document)
        editor.load_text(self.saved_text)
        self.autosaved_text = self.saved_text
        if self.document is not None:
            self._remember_recent(self.document)
        self.app.set_interval(autosave_s, self.autosave)
        recovery = self.store.recovery(self.document)
        if recovery is not None:
            name = self.document.name if self.document else "an untitled document"
            self._offer_recovery(name, recovery)

    def _offer_recovery(self, name: str, recovery: Recovery) -> None:
        self.app.push_screen(
            RecoveryScreen(name, recovery.saved_at[:19].replace("T", " ")), self._recover(recovery.text)
        )

    def _recover(self, text: str) -> Callable[[bool | None], None]:
        def answer(recover: bool | None) -> None:
            if recover:
                self.editor.load_text(text)
                self.app.notify("recovered the autosaved text")
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
            self.app.notify(f"autosave failed: {error}", severity="error")

    def save(self) -> None:
        """Save under the document's name; an untitled document asks for one."""
        if self.document is None:
            self.app.push_screen(PathScreen("Save as:"), self._save_as)
            return
        self._save_to(self.document)

    def save_as_dialog(self) -> None:
        self.app.push_screen(PathScreen("Save as:", str(self.document or "")), self._save_as)

    def _save_as(self, path: str | None, then: Callable[[], None] | None = None) -> None:
        """Save under the name typed (asking first before another file is replaced); then `then`, if it saved."""
        if not path:
            return
        target = Path(path).expanduser()

        def save() -> None:
            if self._save_to(target) and then is not None:
                then()

        if target != self.document and target.exists():
            question = f"{target} exists. Replace it with this document?"
            self.app.push_screen(ConfirmScreen(question, "Replace"), lambda yes: save() if yes else None)
            return
        save()

    def _save_to(self, path: Path) -> bool:
        text = self.editor.text
        renamed = self.document != path
        try:
            self.store.save(path, text)
        except DocumentError as error:
            self._keep_in_autosave(text)
            self.app.notify(str(error), severity="error", timeout=10)
            return False
        if renamed:
            self.store.discard_autosave(self.document)
        self.document = path
        self.saved_text = self.autosaved_text = text
        self.app.sub_title = str(path)
        self.app.notify(f"saved {path}")
        if renamed:
            self.editor.use_language_of(path)
            self._remember_recent(path)
        return True

    def _keep_in_autosave(self, text: str) -> None:
        """A save failed: the text goes into the autosave now (the error says it is kept there)."""
        try:
            self.store.autosave(self.document, text)
            self.autosaved_text = text
        except OSError as error:
            self.app.notify(f"autosave failed too: {error}", severity="error", timeout=10)

    # ----- opening files -------------------------------------------------------------------------

    def open_dialog(self) -> None:
        if self._busy_drafting("a draft is refining: esc cancels it"):
            return
        self.app.run_worker(self._read_recent, thread=True, group="recent-files", exclusive=True)

    def _read_recent(self) -> None:
        recent = self.recent_files.load()
        self.app.call_from_thread(self.app.push_screen, OpenFileScreen(recent), self._open_chosen)

    def _open_chosen(self, path: Path | None) -> None:
        """Unsaved changes are never dropped: saved, or kept in the autosave (offered back on the next open)."""
        if path is None:
            return
        text = self.editor.text
        if text == self.saved_text:
            self._open(path, text, keep=False)
            return
        name = self.document.name if self.document else "The untitled document"
        self.app.push_screen(UnsavedScreen(name, path.name), lambda choice: self._unsaved_answered(path, choice))

    def _unsaved_answered(self, path: Path, choice: UnsavedChoice | None) -> None:
        if choice == "keep":
            self._open(path, self.editor.text, keep=True)
        elif choice == "save" and self.document is None:
            self.app.push_screen(
                PathScreen("Save as:"),
                lambda target: self._save_as(target, then=lambda: self._open(path, self.editor.text, keep=False)),
            )
        elif choice == "save" and self.document is not None and self._save_to(self.document):
            self._open(path, self.editor.text, keep=False)

    def _open(self, path: Path, current: str, *, keep: bool) -> None:
        document = self.document
        self.app.run_worker(
            lambda: self._load(path, document, current, keep), thread=True, group="open-file", exclusive=True
        )

    def _load(self, path: Path, document: Path | None, current: str, keep: bool) -> None:
        """In a worker: the autosave of the text being replaced (if kept), then the file, its recovery, and
        the recent list."""
        if keep:
            try:
                self.store.autosave(document, current)
            except OSError as error:
                message = f"{path.name} not opened: the autosave of your changes failed ({error})"
                self.app.call_from_thread(self.app.notify, message, severity="error", timeout=10)
                return
        try:
            text, note = self.store.load(path)
        except DocumentError as error:
            self.app.call_from_thread(self.app.notify, str(error), severity="error", timeout=10)
            return
        recovery = self.store.recovery(path)
        self._write_recent(path)
        self.app.call_from_thread(self._show_opened, path, text, note, recovery, current)

    def _show_opened(self, path: Path, text: str, note: str, recovery: Recovery | None, replaced: str) -> None:
        if self.editor.text != replaced:  # typed into while the file was read: that text stays
            self.app.notify(f"{path.name} not opened: the document changed meanwhile; open it again", timeout=10)
            return
        if self._busy_drafting(f"{path.name} not opened: a draft is refining for this document (esc cancels it)"):
            return
        self._close_document_views()
        self.document = path
        self.saved_text = self.autosaved_text = text
        self.app.sub_title = str(path)
        self.editor.use_language_of(path)
        self.editor.load_text(text)
        self.editor.focus()
        self.app.notify(f"opened {path}")
        if note:
            self.app.notify(note, severity="warning", timeout=15)
        if recovery is not None:
            self._offer_recovery(path.name, recovery)

    # ----- recent files --------------------------------------------------------------------------

    def _remember_recent(self, path: Path) -> None:
        self.app.run_worker(lambda: self._write_recent(path), thread=True, group="recent-files")

    def _write_recent(self, path: Path) -> None:
        try:
            self.recent_files.add(path)
        except OSError as error:
            self.app.call_from_thread(
                self.app.notify, f"the recent-files list was not updated: {error}", severity="warning"
            )
