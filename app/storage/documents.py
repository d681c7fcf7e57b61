"""Documents on disk: open, atomic save, periodic autosave and recovery after a crash or a kill.

An autosave is one JSON file per document (keyed by the document's absolute path, or "untitled") in
the state dir, written atomically, holding the path, the time and the text. It is newer than the file
and different from it exactly when there is something to recover.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from app.storage.atomic import write_atomic


class DocumentError(Exception):
    """A document that cannot be opened or saved. The message names the file."""


@dataclass(frozen=True)
class Recovery:
    path: Path | None
    text: str
    saved_at: str


class DocumentStore:
    def __init__(self, autosave_dir: Path) -> None:
        self.autosave_dir = autosave_dir

    def autosave_path(self, path: Path | None) -> Path:
        key = str(path.resolve()) if path else "untitled"
        return self.autosave_dir / f"{hashlib.sha256(key.encode()).hexdigest()[:16]}.json"

    def load(self, path: Path) -> str:
        """The file's text; a path that does not exist yet is a new, empty document."""
        if path.is_dir():
            raise DocumentError(f"{path}: is a folder, not a text file")
        try:
            return path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return ""
        except UnicodeDecodeError:
            raise DocumentError(f"{path}: is not UTF-8 text; Sharpen edits text files only") from None
        except OSError as error:
            raise DocumentError(f"{path}: cannot open ({error.strerror or error})") from None

    def save(self, path: Path, text: str) -> None:
        try:
            write_atomic(path, text.encode("utf-8"))
        except OSError as error:
            raise DocumentError(
                f"{path}: cannot save ({error.strerror or error}); your text is kept in the autosave"
            ) from None
        self.discard_autosave(path)

    def autosave(self, path: Path | None, text: str) -> None:
        record = {"path": str(path) if path else None, "saved_at": datetime.now(UTC).isoformat(), "text": text}
        write_atomic(self.autosave_path(path), json.dumps(record).encode("utf-8"))

    def discard_autosave(self, path: Path | None) -> None:
        self.autosave_path(path).unlink(missing_ok=True)

    def recovery(self, path: Path | None) -> Recovery | None:
        """Unsaved text from an earlier session that differs from (and is newer than) the file."""
        autosave = self.autosave_path(path)
        try:
            record = json.loads(autosave.read_text(encoding="utf-8"))
            text, saved_at = record["text"], record["saved_at"]
        except (FileNotFoundError, json.JSONDecodeError, KeyError, TypeError, UnicodeDecodeError):
            return None
        if path is not None and path.exists():
            if autosave.stat().st_mtime < path.stat().st_mtime:
                return None
            try:
                if path.read_text(encoding="utf-8") == text:
                    return None
            except (OSError, UnicodeDecodeError):
                pass
        elif not text:
            return None
        return Recovery(path=path, text=text, saved_at=saved_at)
