"""What a draft is checked against before it is shown: the facts its instruction asks for and, where the
instruction declines, that the draft does not accept. The AR drafter drafts again while a draft fails and
keeps the best (app/orchestration/drafters.py); the reply says how many tries it took and what is still
missing."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.domain.asked_facts import AskedFact, asked_facts, missing_facts
from app.domain.asked_stance import asks_to_decline, turns_decline_around


@dataclass(frozen=True)
class Verdict:
    """How one draft fares: the asked facts it leaves out, and whether it turns an asked decline around."""

    missing: tuple[AskedFact, ...]
    turned_around: bool

    @property
    def passed(self) -> bool:
        return not self.missing and not self.turned_around

    @property
    def rank(self) -> tuple[int, int]:
        """Higher is better: fewer facts missing first, then the stance kept."""
        return (-len(self.missing), 0 if self.turned_around else 1)


@dataclass(frozen=True)
class DraftChecks:
    """What a draft for `instruction` must do: carry `facts`, and decline where `declines`."""

    instruction: str
    facts: tuple[AskedFact, ...]
    declines: bool

    @classmethod
    def of(cls, instruction: str) -> DraftChecks:
        return cls(instruction, asked_facts(instruction), asks_to_decline(instruction))

    @property
    def checks_anything(self) -> bool:
        return bool(self.facts) or self.declines

    def verdict(self, text: str) -> Verdict:
        return Verdict(missing_facts(text, self.facts), turns_decline_around(self.instruction, text))


@dataclass(frozen=True)
class CheckedDraft:
    """What the reply reports of a checked draft: the tries it took (the kept one among them), the facts
    asked, those the kept draft still misses, and whether it still turns a decline around."""

    tries: int
    kept_try: int
    asked: tuple[AskedFact, ...]
    missing: tuple[AskedFact, ...]
    turned_around: bool

    def as_json(self) -> dict[str, Any]:
        return {
            "tries": self.tries,
            "kept_try": self.kept_try,
            "facts_asked": [fact.said for fact in self.asked],
            "facts_missing": [fact.said for fact in self.missing],
            "declines_turned_around": self.turned_around,
        }

    def note(self) -> str:
        """One line for the user ("" where the first draft carried everything asked)."""
        parts = []
        if self.tries > 1:
            parts.append(f"drafted {self.tries} times, kept try {self.kept_try}")
        if self.missing:
            parts.append("still missing " + ", ".join(f'"{fact.said}"' for fact in self.missing))
        if self.turned_around:
            parts.append("it reads as an acceptance where a decline was asked")
        if parts and not self.missing and not self.turned_around:
            parts.append(f"it carries the {len(self.asked)} facts asked" if self.asked else "it keeps the decline")
        return "; ".join(parts)


class CheckRecord:
    """Filled in by a checked draft as it runs (the drafter's tries), read by the reply once it is done."""

    def __init__(self) -> None:
        self.outcome: CheckedDraft | None = None
