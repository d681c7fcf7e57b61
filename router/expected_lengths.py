"""How long each engine's drafts run, learnt from the drafts it finished, so that the wait estimated for a
draft is for the length it will write rather than the length asked for: a draft ends at end-of-text, and
estimates for the length asked read AR's drafts up to 35% high and the embedded drafter's up to 32%.

A finished draft says how long it ran: where it ended by itself (end-of-text, a stop sequence), its length
is known; where it ran to the length asked, only that it would have run at least that far (it is censored,
in survival analysis's word). A draft asked for N is expected to write the mean of min(length, N) over the
last drafts of that engine, model and kind, estimated as Kaplan-Meier does (the restricted mean): a draft
cut at 128 counts as still running at 128 and says nothing beyond, so short requests do not make a long one
look short; past the longest length seen, the drafts still running are taken to run on to N. The mean,
not the median: the drafter's drafts either run to the length asked or end within about 50 tokens, and
a median then lands on one side or the other (it read its 256-token drafts 30% high, and a mean of the
times is what a user's drafts add up to).
"""

from __future__ import annotations

import itertools
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import tomli_w

from router.cost import ExpectedTokens
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
    ended: bool  # ended by itself (end-of-text or a stop sequence), not cut at the length asked

    @property
    def observed(self) -> int:
        """How far the draft is known to have run: its length, or for a cut draft the length asked."""
        return self.written if self.ended else self.asked


def mean_length(drafts: Iterable[WrittenDraft], n: int) -> float:
    """The Kaplan-Meier restricted mean of min(length, n): the area under the share of drafts still running,
    from 0 to n tokens, a cut draft counted as running until its limit."""
    observed = sorted(drafts, key=lambda draft: draft.observed)
    running, at_risk, area, since = 1.0, len(observed), 0.0, 0
    for length, group in itertools.groupby(observed, key=lambda draft: draft.observed):
        if length >= n:
            break
        here = list(group)
        area += running * (length - since)
        since = length
        running *= 1 - sum(draft.ended for draft in here) / at_risk
        at_risk -= len(here)
    return area + running * (n - since)


@dataclass(frozen=True)
class DraftLengths:
    """One engine's last drafts of one kind, by one model."""

    model: str = ""
    drafts: tuple[WrittenDraft, ...] = ()

    @property
    def known(self) -> bool:
        return len(self.drafts) >= MIN_DRAFTS

    def expected(self, n: int) -> float:
        """The tokens a draft asked for `n` is expected to write (`n` itself until MIN_DRAFTS are known)."""
        return mean_length(self.drafts, n) if self.known else float(n)

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

    def expected_tokens(self, kind: Kind, models: Mapping[EngineName, str]) -> ExpectedTokens:
        """For each engine's model: the tokens a draft of `kind` asked for n is expected to write. An engine
        whose own drafts are too few is expected to write as long as all the engines' drafts together: an
        engine that gets every draft must not look faster only because its drafts' lengths alone are learnt."""
        own = {engine: self.of(engine, kind, model) for engine, model in models.items()}
        pooled = DraftLengths("", tuple(draft for known in own.values() for draft in known.drafts))

        def expected(engine: EngineName, n: int) -> float:
            known = own.get(engine)
            return (known if known is not None and known.known else pooled).expected(n)

        return expected

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
