"""Draft traces: how a draft was written, step by step, with its settings and stats, as versioned JSON Lines.

A diffusion draft's trace keeps every refinement pass; an AR draft's keeps every token as it arrived (its
text, its id and when, from the start of the draft), so either plays back without the model.

Line 1 is the header (format, version, engine, model, settings, prompt, canvas length, mask id), then one
line per pass (diffusion) or per token (AR), then a footer with the final text, the stats and, for a
diffusion draft, the text of every token the passes use. A file without its footer is reported as
truncated. Version 1 (before AR drafts had traces) had no engine and only passes: it still loads, as a
diffusion trace. Writing the file is the caller's business (app/ writes it atomically); this module only
serialises.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from engines.events import MASKED_PIECE, DiffusionStats, Done, GenerationStats, Pass

TRACE_FORMAT = "sharpen-trace"
TRACE_VERSION = 2
# The versions this Sharpen reads: 1 had no engine in its header (every trace was a diffusion draft's).
READABLE_VERSIONS = (1, 2)
TraceEngine = Literal["ar", "diffusion"]
TRACE_ENGINES: tuple[TraceEngine, ...] = ("ar", "diffusion")
# An AR trace's header has no mask token.
NO_MASK = -1


class TraceError(Exception):
    """A trace file that cannot be read. The message names the file and the line."""


@dataclass(frozen=True)
class TraceHeader:
    model: str
    backend: str
    prompt: str
    prompt_tokens: int
    canvas_length: int
    mask_token_id: int
    settings: dict[str, Any]
    created: str
    kind: str = "draft"
    # The engine that wrote the draft: an AR trace has tokens where a diffusion trace has passes (and its
    # canvas length is the length asked, its mask id NO_MASK).
    engine: TraceEngine = "diffusion"


@dataclass(frozen=True)
class TokenArrival:
    """One token of an AR draft as it arrived: the engine's token (its index among the tokens generated, its
    id, -1 where the engine does not say, and its text) and when, in seconds from the start of the draft."""

    index: int
    token_id: int
    text: str
    elapsed_s: float


@dataclass
class Trace:
    header: TraceHeader
    passes: list[Pass] = field(default_factory=list)
    text: str | None = None
    stats: DiffusionStats | GenerationStats | None = None
    # An AR draft's tokens, in the order they arrived.
    tokens: list[TokenArrival] = field(default_factory=list)

    @property
    def engine(self) -> TraceEngine:
        return self.header.engine

    @property
    def steps(self) -> int:
        """How many steps the draft took as its trace keeps them: passes, or tokens as they arrived."""
        return len(self.tokens) if self.engine == "ar" else len(self.passes)

    def record(self, event: Pass | TokenArrival | Done) -> None:
        if isinstance(event, Pass):
            self.passes.append(event)
        elif isinstance(event, TokenArrival):
            self.tokens.append(event)
        else:
            self.text, self.stats = event.text, event.stats

    def records(self) -> list[dict[str, Any]]:
        """The trace as its JSON Lines' records: a header, one record a pass, a footer."""
        if self.stats is None or self.text is None:
            raise TraceError("a trace is written once its draft has finished (it has no final stats yet)")
        pieces: dict[str, str] = {}
        records: list[dict[str, Any]] = [
            {"type": "header", "format": TRACE_FORMAT, "version": TRACE_VERSION, **asdict(self.header)}
        ]
        for arrival in self.tokens:
            records.append(
                {
                    "type": "token",
                    "index": arrival.index,
                    "id": arrival.token_id,
                    "text": arrival.text,
                    "elapsed_s": arrival.elapsed_s,
                }
            )
        for p in self.passes:
            for token, piece in zip(p.canvas, p.pieces, strict=True):
                if piece != MASKED_PIECE or token != self.header.mask_token_id:
                    pieces.setdefault(str(token), piece)
            records.append(
                {
                    "type": "pass",
                    "index": p.index,
                    "canvas": list(p.canvas),
                    "committed": list(p.committed),
                    "confidences": list(p.confidences),
                    "stable_prefix": p.stable_prefix,
                    "window": list(p.window),
                    "elapsed_s": p.elapsed_s,
                }
            )
        records.append({"type": "footer", "text": self.text, "stats": asdict(self.stats), "pieces": pieces})
        return records

    def to_jsonl(self) -> str:
        return "".join(json.dumps(record) + "\n" for record in self.records())


def load_trace(path: Path | str) -> Trace:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TraceError(f"{path}: no such trace file") from None
    except (OSError, UnicodeDecodeError) as error:
        raise TraceError(f"{path}: cannot read the trace ({error})") from None
    return parse_trace(text, str(path))


def parse_trace(text: str, source: str = "<trace>") -> Trace:
    """Parse and validate a trace; raise TraceError naming the source and line for anything wrong."""
    records: list[tuple[int, dict[str, Any]]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise TraceError(f"{source}: line {number} is not valid JSON ({error.msg}); the file is corrupt") from None
        if not isinstance(record, dict):
            raise TraceError(f"{source}: line {number} is not a JSON object; the file is corrupt")
        records.append((number, record))
    if not records:
        raise TraceError(f"{source}: the file is empty, not a trace")
    header = _header(records[0], source)
    trace = Trace(header=header)
    piece_table: dict[str, str] = {}
    raw_passes: list[tuple[int, dict[str, Any]]] = []
    step = "token" if header.engine == "ar" else "pass"
    for number, record in records[1:]:
        kind = record.get("type")
        if kind == step == "pass":
            raw_passes.append((number, record))
        elif kind == step == "token":
            trace.tokens.append(_token(number, record, trace.tokens, source))
        elif kind == "footer":
            if number != records[-1][0]:
                raise TraceError(f"{source}: line {number}: the footer must be the last line")
            trace.text, trace.stats, piece_table = _footer(number, record, header.engine, source)
        elif kind in ("pass", "token"):
            raise TraceError(f"{source}: line {number}: a {kind} in the trace of an {header.engine} draft")
        else:
            raise TraceError(f"{source}: line {number}: unknown record type {kind!r}")
    if trace.stats is None:
        raise TraceError(f"{source}: the trace is truncated: it has no footer line (the draft may have been cut off)")
    for expected, (number, record) in enumerate(raw_passes):
        trace.passes.append(_pass(number, record, expected, header, piece_table, source))
    return trace


def _require(record: dict[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    value = record.get(key)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise TraceError(f"{where}: field {key!r} is missing or has the wrong type")
    return value


def _header(numbered: tuple[int, dict[str, Any]], source: str) -> TraceHeader:
    number, record = numbered
    where = f"{source}: line {number}"
    if record.get("type") != "header" or record.get("format") != TRACE_FORMAT:
        raise TraceError(f"{source}: not a Sharpen trace (line 1 is not a {TRACE_FORMAT} header)")
    version = record.get("version")
    if version not in READABLE_VERSIONS:
        readable = " and ".join(str(v) for v in READABLE_VERSIONS)
        raise TraceError(f"{source}: trace version {version!r} is not supported (this Sharpen reads {readable})")
    engine = record.get("engine", "diffusion")
    if engine not in TRACE_ENGINES:
        raise TraceError(f"{where}: engine {engine!r} is not one of {', '.join(TRACE_ENGINES)}")
    return TraceHeader(
        model=_require(record, "model", str, where),
        backend=_require(record, "backend", str, where),
        prompt=_require(record, "prompt", str, where),
        prompt_tokens=_require(record, "prompt_tokens", int, where),
        canvas_length=_require(record, "canvas_length", int, where),
        mask_token_id=_require(record, "mask_token_id", int, where),
        settings=_require(record, "settings", dict, where),
        created=_require(record, "created", str, where),
        kind=record.get("kind", "draft"),
        engine=engine,
    )


def _footer(
    number: int, record: dict[str, Any], engine: TraceEngine, source: str
) -> tuple[str, DiffusionStats | GenerationStats, dict[str, str]]:
    where = f"{source}: line {number}"
    stats = _require(record, "stats", dict, where)
    parsed: DiffusionStats | GenerationStats
    try:
        if engine == "ar":
            parsed = GenerationStats(**stats)
        else:
            parsed = DiffusionStats(**{**stats, "skipped_steps": tuple(stats.get("skipped_steps", ()))})
    except TypeError:
        raise TraceError(f"{where}: the footer's stats do not match this version's fields") from None
    pieces = _require(record, "pieces", dict, where) if engine == "diffusion" else record.get("pieces", {})
    return _require(record, "text", str, where), parsed, pieces


def _token(number: int, record: dict[str, Any], before: list[TokenArrival], source: str) -> TokenArrival:
    where = f"{source}: line {number}"
    index = _require(record, "index", int, where)
    elapsed = float(_require(record, "elapsed_s", (int, float), where))
    if before and (index < before[-1].index or elapsed < before[-1].elapsed_s):
        raise TraceError(f"{where}: token {index} comes before the token on the line above; the file is corrupt")
    return TokenArrival(index, _require(record, "id", int, where), _require(record, "text", str, where), elapsed)


def _pass(
    number: int, record: dict[str, Any], expected: int, header: TraceHeader, pieces: dict[str, str], source: str
) -> Pass:
    where = f"{source}: line {number}"
    index = _require(record, "index", int, where)
    if index != expected:
        raise TraceError(f"{where}: pass {index} where pass {expected} was expected; passes are missing or reordered")
    canvas = _require(record, "canvas", list, where)
    if len(canvas) != header.canvas_length or not all(isinstance(t, int) for t in canvas):
        raise TraceError(f"{where}: the canvas must hold {header.canvas_length} token ids")
    committed = _require(record, "committed", list, where)
    confidences = _require(record, "confidences", list, where)
    if len(committed) != len(confidences) or not all(
        isinstance(p, int) and 0 <= p < header.canvas_length for p in committed
    ):
        raise TraceError(f"{where}: committed positions and confidences do not match the canvas")
    window = _require(record, "window", list, where)
    mask = header.mask_token_id
    try:
        texts = tuple(MASKED_PIECE if t == mask else pieces[str(t)] for t in canvas)
    except KeyError as missing:
        raise TraceError(f"{where}: token {missing} has no text in the footer's piece table") from None
    return Pass(
        index=index,
        canvas=tuple(canvas),
        pieces=texts,
        masked=tuple(t == mask for t in canvas),
        committed=tuple(committed),
        confidences=tuple(float(c) for c in confidences),
        stable_prefix=_require(record, "stable_prefix", int, where),
        window=(int(window[0]), int(window[1])) if len(window) == 2 else (0, header.canvas_length),
        elapsed_s=float(_require(record, "elapsed_s", (int, float), where)),
    )
