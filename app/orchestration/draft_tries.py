"""A draft checked against what its instruction asks (app/domain/draft_check.py), drafted again while it
fails: up to `tries` drafts, the best kept (a draft that copies the prompt back last, then an asked
decline not turned around, then the stances asked taken, then the most asked facts and content words
carried, then the earliest). Only the kept draft's tokens are passed on, so every front end shows, streams and
records the text it gets at the end; with one try allowed, the draft streams as it comes."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

from app.domain.draft_check import CheckedDraft, CheckRecord, DraftChecks, Verdict
from engines.events import Done, Event


@dataclass(frozen=True)
class Tried:
    """A try held back until the tries end: its number (from 1), its events and its verdict."""

    number: int
    events: list[Event]
    done: Done
    verdict: Verdict


def best_of_tries(
    draft: Callable[[int, Tried | None], Iterator[Event]],
    checks: DraftChecks,
    tries: int,
    record: CheckRecord,
) -> Iterator[Event]:
    """The events of the best of up to `tries` drafts (`draft(n, best)` runs try n, from 0, knowing the best
    try so far), stopping at the first that passes the checks; `record` gets what the reply reports. A
    cancelled try ends the draft as it is."""
    best: Tried | None = None
    spent_s = 0.0
    for number in range(tries):
        held: list[Event] = []
        done: Done | None = None
        for event in draft(number, best):
            if isinstance(event, Done):
                done = event
            elif tries == 1:
                yield event
            else:
                held.append(event)
        assert done is not None, "every stream ends with Done"
        spent_s += done.stats.total_s
        verdict = checks.verdict(done.text)
        if done.stats.finish_reason == "cancelled":
            record.outcome = _outcome(checks, number + 1, number + 1, verdict)
            yield from held
            yield _timed(done, spent_s)
            return
        if best is None or verdict.rank > best.verdict.rank:
            best = Tried(number + 1, held, done, verdict)
        if verdict.passed:
            break
    assert best is not None, "at least one try"
    record.outcome = _outcome(checks, number + 1, best.number, best.verdict)
    yield from best.events
    yield _timed(best.done, spent_s)


def _outcome(checks: DraftChecks, tries: int, kept: int, verdict: Verdict) -> CheckedDraft:
    return CheckedDraft(
        tries,
        kept,
        checks.facts,
        verdict.missing,
        verdict.turned_around,
        verdict.echoes,
        verdict.stances_missing,
        verdict.new_turn,
        checks.topics,
        verdict.topics_missing,
        verdict.placeholders,
    )


def _timed(done: Done, spent_s: float) -> Done:
    """The kept draft's Done, timed with every try it took (what the writer waited)."""
    return replace(done, stats=replace(done.stats, total_s=spent_s))
