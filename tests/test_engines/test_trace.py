"""Traces: round-trip through JSON Lines (a diffusion draft's passes, an AR draft's tokens), the version before AR
traces still read, and clear errors for corrupt, truncated or foreign files."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from scripted_backend import ScriptedBackend, fixed_script

from app.storage.traces import save_trace
from engines.diffusion.sampler import DiffusionSampler
from engines.diffusion.settings import DiffusionSettings
from engines.events import Done, GenerationStats, Pass
from engines.trace import NO_MASK, TRACE_VERSION, TokenArrival, Trace, TraceError, TraceHeader, load_trace, parse_trace

SETTINGS = DiffusionSettings.reference(steps=6, block_length=4)


def recorded_trace() -> Trace:
    backend = ScriptedBackend(fixed_script([1, 2, 3, 4, 5, 6, 7, 8], [0.5, 0.6, 0.7, 0.8, 0.9, 0.4, 0.3, 0.2], 2))
    trace = Trace(
        TraceHeader(
            model="scripted",
            backend="test",
            prompt="Write",
            prompt_tokens=2,
            canvas_length=8,
            mask_token_id=backend.mask_token_id,
            settings=SETTINGS.as_dict(),
            created="2026-11-29T00:00:00+00:00",
        )
    )
    for event in DiffusionSampler(backend).generate([0, 9], 8, SETTINGS):
        assert isinstance(event, Pass | Done)
        trace.record(event)
    return trace


def test_round_trip(tmp_path: Path) -> None:
    trace = recorded_trace()
    path = tmp_path / "draft.trace.jsonl"
    save_trace(trace, path)
    loaded = load_trace(path)
    assert loaded.header == trace.header
    assert loaded.passes == trace.passes
    assert loaded.text == trace.text == "bcdefghi"
    assert loaded.stats == trace.stats
    assert len(path.read_text().splitlines()) == 2 + len(trace.passes)


def test_an_unfinished_trace_cannot_be_written() -> None:
    trace = recorded_trace()
    trace.stats = None
    with pytest.raises(TraceError, match="has no final stats"):
        trace.to_jsonl()


def lines() -> list[str]:
    return recorded_trace().to_jsonl().splitlines()


@pytest.mark.parametrize(
    ("mangle", "message"),
    [
        (lambda ls: ls[:-1], "truncated: it has no footer"),
        (lambda ls: [*ls[:3], ls[3][:40], *ls[4:]], "line 4 is not valid JSON"),
        (lambda ls: [ls[0], ls[2], ls[1], *ls[3:]], "pass 1 where pass 0 was expected"),
        (
            lambda ls: [ls[0].replace(f'"version": {TRACE_VERSION}', '"version": 9'), *ls[1:]],
            "trace version 9 is not supported",
        ),
        (lambda ls: ['{"hello": 1}', *ls[1:]], "not a Sharpen trace"),
        (lambda ls: [], "the file is empty"),
        (lambda ls: [ls[0], ls[1].replace('"canvas": [', '"canvas": [1, '), *ls[2:]], "must hold 8 token ids"),
        (lambda ls: [*ls[:-1], ls[-1], ls[1]], "the footer must be the last line"),
    ],
)
def test_bad_traces_are_rejected_with_the_line(mangle: Callable[[list[str]], list[str]], message: str) -> None:
    with pytest.raises(TraceError, match=message):
        parse_trace("\n".join(mangle(lines())), "t.jsonl")


def test_missing_file_and_piece_table(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="no such trace file"):
        load_trace(tmp_path / "nope.jsonl")
    ls = lines()
    footer = json.loads(ls[-1])
    footer["pieces"] = {}
    with pytest.raises(TraceError, match="has no text in the footer's piece table"):
        parse_trace("\n".join([*ls[:-1], json.dumps(footer)]))


# Written by Sharpen before AR drafts had traces (trace version 1: no engine in the header), from the scripted
# backend of tests/test_ui/conftest.py's fixed trace.
VERSION_1 = Path(__file__).parents[1] / "data" / "trace-v1.jsonl"


def test_a_trace_written_before_ar_traces_still_loads() -> None:
    assert json.loads(VERSION_1.read_text().splitlines()[0])["version"] == 1
    trace = load_trace(VERSION_1)
    assert trace.engine == "diffusion" and trace.tokens == []
    assert [p.index for p in trace.passes] == [0, 1, 2, 3] and trace.steps == 4
    assert trace.text == "abcdefghijabcdef"
    assert trace.records()[0]["version"] == TRACE_VERSION, "written again, it is the current version"
    assert parse_trace(trace.to_jsonl()).passes == trace.passes


def ar_trace() -> Trace:
    settings = {"max_tokens": 16}
    header = TraceHeader("smollm2", "llama.cpp", "Say hi", 5, 16, NO_MASK, settings, "2026-11-29", engine="ar")
    trace = Trace(header)
    for index, (text, at) in enumerate([("Hi", 0.05), (" Sam", 0.07), ("!", 0.09)]):
        trace.record(TokenArrival(index, 100 + index, text, at))
    trace.record(Done("Hi Sam!", GenerationStats(5, 0, 0, 3, 0.05, 0.1, "eos")))
    return trace


def test_an_ar_trace_keeps_each_token_and_when_it_arrived(tmp_path: Path) -> None:
    trace = ar_trace()
    path = tmp_path / "ar.trace.jsonl"
    save_trace(trace, path)
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["type"] for r in records] == ["header", "token", "token", "token", "footer"]
    assert records[0]["engine"] == "ar" and records[0]["version"] == TRACE_VERSION
    loaded = load_trace(path)
    assert loaded.engine == "ar" and loaded.passes == [] and loaded.steps == 3
    assert loaded.tokens == trace.tokens and loaded.stats == trace.stats and loaded.text == "Hi Sam!"


@pytest.mark.parametrize(
    ("mangle", "message"),
    [
        (lambda ls: [ls[0], ls[2], ls[1], *ls[3:]], "token 0 comes before the token on the line above"),
        (lambda ls: [ls[0], ls[1].replace('"id"', '"token"'), *ls[2:]], "field 'id' is missing"),
        (lambda ls: [ls[0].replace('"engine": "ar"', '"engine": "gpt"'), *ls[1:]], "engine 'gpt' is not one of"),
        (lambda ls: [*ls[:-1], ls[-1].replace('"prompt_tokens"', '"canvas_tokens"')], "stats do not match"),
        (lambda ls: [ls[0], *lines()[1:2], *ls[1:]], "a pass in the trace of an ar draft"),
    ],
)
def test_bad_ar_traces_are_rejected_with_the_line(mangle: Callable[[list[str]], list[str]], message: str) -> None:
    with pytest.raises(TraceError, match=message):
        parse_trace("\n".join(mangle(ar_trace().to_jsonl().splitlines())), "ar.jsonl")
