"""The draft history on its own: kept, listed newest first, pruned, its traces loaded on demand; a file that is
not a database set aside, a newer one left alone."""

from __future__ import annotations

import os
import sqlite3
import zlib
from pathlib import Path

from app.domain.job import Job, Opened
from app.domain.reply import Reply
from app.storage.draft_history import DraftHistory
from engines.events import Done, Event, GenerationStats, Token
from engines.llama_ar import LlamaAREngine
from router.request import Route


def finished(ar_engine: LlamaAREngine, text: str, tokens: tuple[str, ...] = ()) -> Reply:
    """A finished AR reply (the engine only names the model: the events are given), its `tokens` streamed first."""
    done = Done(text, GenerationStats(3, 0, 0, 2, 0.01, 0.02, "eos"))
    events: list[Event] = [*(Token(piece, 100 + index, index) for index, piece in enumerate(tokens)), done]
    job = Job(2, lambda: Opened(iter(events), ar_engine))
    reply = Reply(Route("ar", "smollm2-135m-instruct", 2), job, kind="draft")
    reply.text()
    return reply


def test_drafts_are_kept_per_document_newest_first_and_pruned(tmp_path: Path, ar_engine: LlamaAREngine) -> None:
    history = DraftHistory(tmp_path / "drafts.sqlite3", keep_per_document=3)
    letter, notes = tmp_path / "letter.txt", tmp_path / "notes.txt"
    for n in range(5):
        assert history.add(letter, finished(ar_engine, f"draft {n}"), f"ask {n}") is not None
    history.add(notes, finished(ar_engine, "a note"), "")
    assert [past.text for past in history.drafts(letter)] == ["draft 4", "draft 3", "draft 2"]
    assert [past.instruction for past in history.drafts(notes)] == [""]
    past = history.drafts(letter)[0]
    assert past.engine == "ar" and past.route["engine"] == "ar" and not past.has_trace
    assert history.with_trace(past).trace() is None


def test_the_history_is_bounded_in_bytes(tmp_path: Path, ar_engine: LlamaAREngine) -> None:
    history = DraftHistory(tmp_path / "drafts.sqlite3", keep_bytes=2500)
    for n in range(5):
        history.add(None, finished(ar_engine, f"{n}" * 1000), "")
    assert [past.text[0] for past in history.drafts(None)] == ["4", "3"]


def test_a_file_that_is_not_a_database_is_set_aside(tmp_path: Path, ar_engine: LlamaAREngine) -> None:
    path = tmp_path / "drafts.sqlite3"
    path.write_bytes(b"not sqlite " * 200)
    history = DraftHistory(path)
    assert history.add(None, finished(ar_engine, "kept"), "") is not None
    assert "set aside" in history.warning
    assert [p.read_bytes()[:11] for p in tmp_path.glob("drafts.sqlite3.corrupt-*")] == [b"not sqlite "]
    assert [past.text for past in DraftHistory(path).drafts(None)] == ["kept"]


def test_a_history_from_a_newer_sharpen_is_left_alone(tmp_path: Path, ar_engine: LlamaAREngine) -> None:
    path = tmp_path / "drafts.sqlite3"
    with sqlite3.connect(path) as connection:
        connection.execute("PRAGMA user_version = 99")
    history = DraftHistory(path)
    assert history.add(None, finished(ar_engine, "lost"), "") is None
    assert "schema version 99" in history.warning and path.exists()
    assert not list(tmp_path.glob("*.corrupt-*"))


def test_a_document_whose_name_is_not_utf8_keeps_its_drafts(tmp_path: Path, ar_engine: LlamaAREngine) -> None:
    history = DraftHistory(tmp_path / "drafts.sqlite3")
    letter = Path(os.fsdecode(bytes(tmp_path) + b"/caf\xe9.txt"))  # the name holds a lone surrogate
    assert history.add(letter, finished(ar_engine, "a reply"), "ask") is not None
    assert [past.text for past in history.drafts(letter)] == ["a reply"] and not history.warning


def test_an_ar_draft_keeps_its_tokens_for_playback(tmp_path: Path, ar_engine: LlamaAREngine) -> None:
    history = DraftHistory(tmp_path / "drafts.sqlite3")
    history.add(None, finished(ar_engine, "Hi Sam", ("Hi", " Sam")), "greet Sam")
    (past,) = history.drafts(None)
    assert past.has_trace
    trace = history.with_trace(past).trace()
    assert trace is not None and trace.engine == "ar" and trace.header.model == "smollm2-135m-instruct"
    assert [(t.index, t.text) for t in trace.tokens] == [(0, "Hi"), (1, " Sam")]
    assert trace.tokens[0].elapsed_s <= trace.tokens[1].elapsed_s


# The table as Sharpen wrote it before AR drafts had traces (schema 1, unchanged), with a diffusion draft's
# trace in trace version 1.
OLD_SCHEMA = """
CREATE TABLE drafts (id INTEGER PRIMARY KEY AUTOINCREMENT, document TEXT NOT NULL, created TEXT NOT NULL,
    kind TEXT NOT NULL, instruction TEXT NOT NULL, engine TEXT NOT NULL, model TEXT NOT NULL, route TEXT NOT NULL,
    settings TEXT NOT NULL, text TEXT NOT NULL, trace BLOB, size INTEGER NOT NULL);
CREATE INDEX drafts_by_document ON drafts (document, id);
PRAGMA user_version = 1;
"""
VERSION_1_TRACE = Path(__file__).parents[1] / "data" / "trace-v1.jsonl"


def test_drafts_kept_before_ar_traces_still_load(tmp_path: Path, ar_engine: LlamaAREngine) -> None:
    path = tmp_path / "drafts.sqlite3"
    packed = zlib.compress(VERSION_1_TRACE.read_bytes())
    with sqlite3.connect(path) as connection:
        connection.executescript(OLD_SCHEMA)
        row = ("untitled", "2026-11-29T00:00:00+00:00", "draft", "a list", "diffusion", "scripted", "{}", "{}")
        connection.execute(
            "INSERT INTO drafts (document, created, kind, instruction, engine, model, route, settings, text, trace, "
            "size) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (*row, "abcdefghijabcdef", packed, 16 + len(packed)),
        )
        connection.execute(
            "INSERT INTO drafts (document, created, kind, instruction, engine, model, route, settings, text, trace, "
            "size) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, ?)",
            ("untitled", "2026-11-29T00:01:00+00:00", "draft", "", "ar", "smollm2", "{}", "{}", "Hello", 5),
        )
    connection.close()
    history = DraftHistory(path)
    history.add(None, finished(ar_engine, "Hi", ("Hi",)), "")
    newest, old_ar, old_diffusion = history.drafts(None)
    assert not history.warning
    trace = history.with_trace(old_diffusion).trace()
    assert trace is not None and trace.engine == "diffusion" and len(trace.passes) == 4
    assert not old_ar.has_trace and history.with_trace(old_ar).trace() is None
    new_trace = history.with_trace(newest).trace()
    assert new_trace is not None and new_trace.engine == "ar"
