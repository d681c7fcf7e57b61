"""How long each engine's drafts run, learnt from the drafts it finished, so that an estimate is for the
length a draft will write rather than the length asked for: a draft ends at end-of-text, and on the
project's unseen instructions the embedded drafter's 128-token drafts ended early often enough that an
estimate for the length asked read 16% to 32% high.

A finished draft says how long it ran: where it ended by itself (end-of-text, a stop sequence), its length
is known; where it ran to the length asked, only that it would have run at least that far. The tokens a
draft of N is expected to write are the median, over the last drafts of that engine, model and kind, of the
length each would have written had N been asked: min(length, N) for a draft that ended by itself, and N for
one that was cut (it may have run on: the estimate errs long, as it did before anything was learnt). The
median, not the mean: most drafts run to the length asked and a few end far sooner, and the mean put the
typical draft's estimate 21% low (bench/drafter_vs_ar.py, the drafter at 256 tokens).
"""

from __future__ import annotations

import statistics
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import tomli_w

from router.request import ENGINES, KINDS, EngineName, Kind

LENGTHS_VERSION = 1
# The drafts kept for each engine, model and kind: enough to average over a user's usual requests, few
# enough that a change of habit (longer documents, another kind of text) shows within a day's drafts.
KEPT_DRAFTS = 24
# Fewer drafts than this say too little: the length asked for is assumed.
MIN_DRAFTS = 3
# Only drafts and rewrites are routed between the engines by their estimates.
LEARNT_KINDS: tuple[Kind, ...] = ("draft", "infill")


@dataclass(frozen=True)
class WrittenDraft:
    asked: int
    written: int
    ended: bool  # ended by itself before the length asked (end-of-text or a stop sequence)

    def as_if_asked(self, n: int) -> int:
        return min(self.written, n) if self.ended else n


@dataclass(frozen=True)
class DraftLengths:
    """One engine's last drafts of one kind, by one model."""

    model: str = ""
    drafts: tuple[WrittenDraft, ...] = ()

    def expected(self, n: int) -> float:
        """The tokens a draft of `n` is expected to write (`n` itself until MIN_DRAFTS drafts are known)."""
        if len(self.drafts) < MIN_DRAFTS:
            return float(n)
        return float(statistics.median(draft.as_if_asked(n) for draft in self.drafts))

    def with_draft(self, draft: WrittenDraft) -> DraftLengths:
        return replace(self, drafts=(*self.drafts, draft)[-KEPT_DRAFTS:])


@dataclass(frozen=True)
class LengthBook:
    """Every engine's draft lengths, by (engine, kind)."""

    lengths: Mapping[tuple[EngineName, Kind], DraftLengths] = field(default_factory=dict)

    def of(self, engine: EngineName, kind: Kind, model: str) -> DraftLengths:
        """What is known of `model`'s drafts of `kind` on `engine` (nothing, if another model wrote them)."""
        known = self.lengths.get((engine, kind))
        return known if known is not None and known.model == model else DraftLengths(model)

    def expected_tokens(self, kind: Kind, models: Mapping[EngineName, str]) -> Callable[[EngineName, int], float]:
        """For each engine's model: the tokens a draft of `kind` and length n is expected to write."""
        known = {engine: self.of(engine, kind, model) for engine, model in models.items()}
        return lambda engine, n: known[engine].expected(n) if engine in known else float(n)

    def recorded(self, engine: EngineName, kind: Kind, model: str, draft: WrittenDraft) -> LengthBook:
        updated = self.of(engine, kind, model).with_draft(draft)
        return LengthBook({**self.lengths, (engine, kind): updated})


def render_lengths(book: LengthBook) -> str:
    sections: dict[str, Any] = {"version": LENGTHS_VERSION}
    for (engine, kind), known in sorted(book.lengths.items()):
        drafts = [{"asked": d.asked, "written": d.written, "ended": d.ended} for d in known.drafts]
        sections.setdefault(engine, {})[kind] = {"model": known.model, "drafts": drafts}
    return tomli_w.dumps(sections)


def load_lengths(path: Path) -> tuple[LengthBook, str | None]:
    """The saved draft lengths, or none and a warning saying why they were not used (routing must always
    work: estimates then assume the length asked, as before anything was learnt)."""
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return LengthBook(), None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        return LengthBook(), f"{path}: cannot read the draft lengths ({error}); estimates assume the length asked"
    try:
        return _parsed(raw), None
    except (TypeError, ValueError) as error:
        return LengthBook(), f"{path}: the draft lengths are invalid ({error}); they are learnt again from new drafts"


def _parsed(raw: dict[str, Any]) -> LengthBook:
    if raw.get("version") != LENGTHS_VERSION:
        raise ValueError(f"version {raw.get('version')!r}, expected {LENGTHS_VERSION}")
    lengths: dict[tuple[EngineName, Kind], DraftLengths] = {}
    for engine in ENGINES:
        section = raw.get(engine, {})
        if not isinstance(section, dict):
            raise ValueError(f"{engine} is not a table")
        for kind, known in section.items():
            if kind not in KINDS or not isinstance(known, dict) or not isinstance(known.get("model"), str):
                raise ValueError(f"{engine}.{kind} is not a kind's table with a model")
            drafts = tuple(_draft(entry, f"{engine}.{kind}") for entry in known.get("drafts", []))
            lengths[engine, kind] = DraftLengths(known["model"], drafts[-KEPT_DRAFTS:])
    return LengthBook(lengths)


def _draft(entry: Any, where: str) -> WrittenDraft:
    if not isinstance(entry, dict) or set(entry) != {"asked", "written", "ended"}:
        raise ValueError(f"{where}: a draft needs asked, written and ended")
    asked, written, ended = entry["asked"], entry["written"], entry["ended"]
    counts_ok = all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in (asked, written))
    if not counts_ok or not isinstance(ended, bool) or asked < 1:
        raise ValueError(f"{where}: asked and written are token counts, ended true or false")
    return WrittenDraft(asked, written, ended)
