"""Documents on disk: open, atomic save, periodic autosave and recovery after a crash or a kill.

An autosave is one JSON file per document (keyed by the document's absolute path, or "untitled") in
the state dir, written atomically, holding the path, the time and the text. It is newer than the file
and different from it exactly when there is something to recover.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from app.storage.atomic import write_atomic


class DocumentError(Exception):
    """A document that cannot be opened or saved. The message names the file."""


# What every front end says of text whose bytes were not UTF-8 (`{what} held bytes that ...`).
NOT_UTF8 = "held bytes that are not UTF-8; they were read as U+FFFD"
SURROGATE = re.compile("[\ud800-\udfff]")
# Lone surrogates that are not surrogateescape's stand-ins for the bytes 0x80-0xff.
_NOT_ESCAPED = re.compile("[\ud800-\udc7f\udd00-\udfff]")


def valid_text(text: str) -> tuple[str, bool]:
    """The text with each lone surrogate made U+FFFD, and whether there was one. Those Python puts for bytes
    that are not UTF-8 (surrogateescape: command-line arguments, files read with it) are turned back into
    their bytes first, so a run of bad bytes reads as UTF-8's own decoder with errors="replace" reads it."""
    if not SURROGATE.search(text):
        return text, False
    return _NOT_ESCAPED.sub("\ufffd", text).encode("utf-8", "surrogateescape").decode("utf-8", "replace"), True


def read_text_lenient(path: Path) -> tuple[str, bool]:
    """A UTF-8 text file's text (newlines as read_text reads them), bytes that are not UTF-8 read as U+FFFD,
    and whether there were any. OSError as read_text raises it."""
    return valid_text(path.read_text(encoding="utf-8", errors="surrogateescape"))


@dataclass(frozen=True)
class Recovery:
    path: Path | None
    text: str
    saved_at: str


class DocumentStore:
    def __init__(self, autosave_dir: Path) -> None:
        self.autosave_dir = autosave_dir

    def autosave_path(self, path: Path | None) -> Path:
        key = os.fsencode(path.resolve()) if path else b"untitled"  # a path's own bytes, UTF-8 or not
        return self.autosave_dir / f"{hashlib.sha256(key).hexdigest()[:16]}.json"

    def load(self, path: Path) -> tuple[str, str]:
        """The file's text (a path that does not exist yet is a new, empty document), and a note for the user
        ("" if none): bytes that are not UTF-8 are read as U+FFFD, which saving writes in their place."""
        try:
            if path.is_dir():
                raise DocumentError(f"{path}: is a folder, not a text file")
            text, replaced = read_text_lenient(path)
        except FileNotFoundError:
            return "", ""
        except OSError as error:
            raise DocumentError(f"{path}: cannot open ({error.strerror or error})") from None
        if "\x00" in text:  # an image or an archive: opened as text, saving it would destroy it
            raise DocumentError(f"{path}: holds NUL bytes, so it is not a text file; Sharpen edits text files")
        if not replaced:
            return text, ""
        return text, (
            f"{valid_text(path.name)[0]} {NOT_UTF8} (\ufffd); saving writes the file as UTF-8 with these replacement "
            "characters in place of the original bytes"
        )

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
            # Valid text only: a hand-edited autosave can hold a lone surrogate ("\\ud800"), which no model takes.
            text, saved_at = valid_text(record["text"])[0], record["saved_at"]
        except (FileNotFoundError, json.JSONDecodeError, KeyError, TypeError, UnicodeDecodeError):
            return None
        if path is not None and path.exists():
            if autosave.stat().st_mtime < path.stat().st_mtime:
                return None
            try:
                if read_text_lenient(path)[0] == text:
                    return None
            except OSError:
                pass
        elif not text:
            return None
        return Recovery(path=path, text=text, saved_at=saved_at)
