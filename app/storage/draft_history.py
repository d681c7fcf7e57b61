"""Every finished draft, kept with its document: a small SQLite database in the state dir (the convention of
oterm and simonw/llm), bounded in size and pruned oldest first. A database that cannot be read is set aside
with a warning and a new one started: the history is a convenience, never a reason to fail."""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import zlib
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from app.domain.reply import Reply
from engines.trace import Trace, TraceError, parse_trace

SCHEMA_VERSION = 1
# Drafts kept per document, and bytes kept in all (text and compressed traces), before the oldest go.
KEEP_PER_DOCUMENT = 200
KEEP_BYTES = 64 * 2**20
UNTITLED = "untitled"
# What SQLite says of a file that is not (or no longer) a database: only such a file is set aside.
_NOT_A_DATABASE = {sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB}


class _NewerHistory(Exception):
    """The file was written by a newer Sharpen: left as it is, and no history this session."""


_SCHEMA = """
CREATE TABLE IF NOT EXISTS drafts (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    document TEXT NOT NULL,
    created TEXT NOT NULL,
    kind TEXT NOT NULL,
    instruction TEXT NOT NULL,
    engine TEXT NOT NULL,
    model TEXT NOT NULL,
    route TEXT NOT NULL,
    settings TEXT NOT NULL,
    text TEXT NOT NULL,
    trace BLOB,
    size INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS drafts_by_document ON drafts (document, id);
"""


@dataclass(frozen=True)
class PastDraft:
    id: int
    document: str
    created: str
    kind: str
    instruction: str
    engine: str
    model: str
    route: dict[str, Any]
    settings: dict[str, Any]
    text: str
    # The trace as kept: zlib-compressed JSON Lines (None for a draft kept without one, as AR drafts were before
    # trace version 2, or not loaded: see has_trace).
    packed_trace: bytes | None = None
    has_trace: bool = False

    @property
    def local_time(self) -> str:
        try:
            return f"{datetime.fromisoformat(self.created).astimezone():%Y-%m-%d %H:%M}"
        except ValueError:
            return self.created[:16]

    @property
    def summary(self) -> str:
        asked = self.instruction or ("rewrite" if self.kind == "infill" else "what belongs here")
        preview = " ".join(self.text.split())[:60]
        return f"{self.local_time}  {self.engine:<9}  {asked[:40]}  “{preview}”"

    def trace(self) -> Trace | None:
        """How the draft was written: a diffusion draft's passes or an AR draft's tokens (None for a draft kept
        without a trace, or a trace that no longer reads)."""
        if self.packed_trace is None:
            return None
        try:
            return parse_trace(zlib.decompress(self.packed_trace).decode("utf-8"), f"draft {self.id}")
        except (zlib.error, UnicodeDecodeError, TraceError):
            return None


def document_key(document: Path | None) -> str:
    """The document's full path as SQLite can store it: a name that is not UTF-8 keeps its bytes escaped."""
    if document is None:
        return UNTITLED
    return os.fsencode(document.expanduser().resolve()).decode("utf-8", "backslashreplace")


class DraftHistory:
    def __init__(self, path: Path, *, keep_per_document: int = KEEP_PER_DOCUMENT, keep_bytes: int = KEEP_BYTES):
        self.path = path
        self.keep_per_document = keep_per_document
        self.keep_bytes = keep_bytes
        # Set when the database could not be read and was set aside: say it once, then carry on.
        self.warning = ""
        self._ready = False
        self._disabled = False
        # add() and drafts() run in worker threads: the file is opened (and set aside) once.
        self._opening = threading.Lock()

    @contextmanager
    def _connection(self) -> Iterator[sqlite3.Connection]:
        with self._opening:
            if not self._ready:
                self._open()
        if self._disabled:
            raise _NewerHistory("the draft history is off this session")
        with closing(sqlite3.connect(self.path, timeout=5)) as connection, connection:
            yield connection

    def _open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._create()
        except _NewerHistory as error:
            self._disabled = True
            self.warning = f"the draft history is off this session: {self.path} {error}"
        except sqlite3.DatabaseError as error:
            if error.sqlite_errorcode not in _NOT_A_DATABASE:
                raise  # locked, or a disk error: the file is fine, this call fails (and says why)
            aside = self.path.with_name(f"{self.path.name}.corrupt-{datetime.now(UTC):%Y%m%dT%H%M%S%f}")
            self.path.replace(aside)
            self.warning = (
                f"the draft history could not be read ({error}): set aside as {aside.name}, a new one started"
            )
            self._create()
        self._ready = True  # not after a locked file: the next call tries again

    def _create(self) -> None:
        with closing(sqlite3.connect(self.path, timeout=5)) as connection, connection:
            version = connection.execute("PRAGMA user_version").fetchone()[0]
            if version not in (0, SCHEMA_VERSION):
                raise _NewerHistory(f"has schema version {version}; this Sharpen reads {SCHEMA_VERSION}")
            connection.executescript(_SCHEMA)
            connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            connection.execute("SELECT count(*) FROM drafts").fetchone()

    # ----- writing -------------------------------------------------------------------------------

    def add(self, document: Path | None, reply: Reply, instruction: str) -> int | None:
        """Keep a finished draft; its id, or None if the history could not be written (it says why in
        `warning`)."""
        if reply.done is None:
            raise ValueError("a draft is kept once it has finished")
        trace = reply.trace()
        packed = zlib.compress(trace.to_jsonl().encode("utf-8")) if trace is not None else None
        text = reply.done.text
        row = (
            document_key(document),
            datetime.now(UTC).isoformat(timespec="seconds"),
            reply.kind,
            instruction,
            reply.engine,
            reply.model,
            json.dumps(reply.route.as_json()),
            json.dumps(reply.settings.as_dict() if reply.settings is not None else {}),
            text,
            packed,
            len(text.encode("utf-8")) + (len(packed) if packed else 0),
        )
        try:
            with self._connection() as connection:
                cursor = connection.execute(
                    "INSERT INTO drafts (document, created, kind, instruction, engine, model, route, settings, "
                    "text, trace, size) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    row,
                )
                self._prune(connection, row[0])
                return cursor.lastrowid
        except _NewerHistory:
            return None  # said once, when the file was opened
        except (sqlite3.Error, OSError) as error:
            self.warning = f"this draft was not kept in the history: {error}"
            return None

    def _prune(self, connection: sqlite3.Connection, document: str) -> None:
        connection.execute(
            "DELETE FROM drafts WHERE document = ? AND id NOT IN "
            "(SELECT id FROM drafts WHERE document = ? ORDER BY id DESC LIMIT ?)",
            (document, document, self.keep_per_document),
        )
        total = connection.execute("SELECT coalesce(sum(size), 0) FROM drafts").fetchone()[0]
        while total > self.keep_bytes:
            oldest = connection.execute("SELECT id, size FROM drafts ORDER BY id LIMIT 1").fetchone()
            if oldest is None:
                break
            connection.execute("DELETE FROM drafts WHERE id = ?", (oldest[0],))
            total -= oldest[1]

    # ----- reading -------------------------------------------------------------------------------

    def drafts(self, document: Path | None) -> list[PastDraft]:
        """This document's drafts, newest first ([] if the history cannot be read; `warning` says why)."""
        try:
            with self._connection() as connection:
                rows = connection.execute(
                    "SELECT id, document, created, kind, instruction, engine, model, route, settings, text, "
                    "trace IS NOT NULL FROM drafts WHERE document = ? ORDER BY id DESC",
                    (document_key(document),),
                ).fetchall()
        except _NewerHistory:
            return []
        except (sqlite3.Error, OSError) as error:
            self.warning = f"the draft history could not be read: {error}"
            return []
        return [self._past(row) for row in rows]

    @staticmethod
    def _past(row: tuple[Any, ...]) -> PastDraft:
        return PastDraft(
            id=row[0],
            document=row[1],
            created=row[2],
            kind=row[3],
            instruction=row[4],
            engine=row[5],
            model=row[6],
            route=json.loads(row[7]),
            settings=json.loads(row[8]),
            text=row[9],
            has_trace=bool(row[10]),
        )

    def with_trace(self, past: PastDraft) -> PastDraft:
        """The draft with its trace loaded (the list leaves traces out: they can be megabytes each)."""
        if not past.has_trace or past.packed_trace is not None:
            return past
        try:
            with self._connection() as connection:
                row = connection.execute("SELECT trace FROM drafts WHERE id = ?", (past.id,)).fetchone()
        except _NewerHistory:
            return past
        except (sqlite3.Error, OSError) as error:
            self.warning = f"the draft's trace could not be read: {error}"
            return past
        return replace(past, packed_trace=row[0] if row else None)
