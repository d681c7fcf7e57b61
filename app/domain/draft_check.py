"""What a draft is checked against before it is shown: the facts its instruction asks for, that it does not
copy the instruction or the document back (a draft that echoes the instruction carries every fact asked),
and that it takes the stance asked (declines, accepts, apologises; a decline not turned into an
acceptance). The AR drafter drafts again while a draft fails and keeps the best
(app/orchestration/drafters.py); the reply says how many tries it took and what is still missing."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from app.domain.asked_facts import AskedFact, asked_facts, missing_facts
from app.domain.asked_stance import Stance, asked_stances, takes, turns_decline_around


@dataclass(frozen=True)
class Verdict:
    """How one draft fares: the asked facts it leaves out, the asked stances it does not take, whether it
    turns an asked decline around, and whether it copies the prompt back."""

    missing: tuple[AskedFact, ...]
    turned_around: bool
    echoes: bool = False
    stances_missing: tuple[Stance, ...] = ()
    # The draft goes on into the chat's next turn ("Best, Ana\nuser\nHow many...").
    new_turn: bool = False

    @property
    def passed(self) -> bool:
        return not (self.missing or self.turned_around or self.echoes or self.stances_missing or self.new_turn)

    @property
    def rank(self) -> tuple[int, int, int, int]:
        """Higher is better: a draft of its own first (no copying back, no next turn), then fewer facts
        missing, then the stance not turned around, then the stances taken."""
        own = 0 if self.echoes or self.new_turn else 1
        return (own, -len(self.missing), 0 if self.turned_around else 1, -len(self.stances_missing))


@dataclass(frozen=True)
class DraftChecks:
    """What a draft for `instruction` must do: carry `facts`, take the `stances` asked, and copy no run of
    ECHO_RUN words of the instruction or of the document (`echoed`) back."""

    instruction: str
    facts: tuple[AskedFact, ...]
    stances: frozenset[Stance]
    echoed: frozenset[tuple[str, ...]] = field(default=frozenset(), repr=False)

    @classmethod
    def of(cls, instruction: str, document: str = "") -> DraftChecks:
        """The checks for a draft asked by `instruction`, written into `document` (the text around the cursor)."""
        runs = frozenset(word_runs(instruction)) | frozenset(word_runs(document))
        return cls(instruction, asked_facts(instruction), asked_stances(instruction), runs)

    @property
    def checks_anything(self) -> bool:
        return bool(self.facts) or bool(self.stances)

    def verdict(self, text: str) -> Verdict:
        echoes = any(run in self.echoed for run in word_runs(text))
        not_taken = tuple(stance for stance in sorted(self.stances) if not takes(stance, text))
        turned = turns_decline_around(self.instruction, text)
        return Verdict(missing_facts(text, self.facts), turned, echoes, not_taken, bool(NEW_TURN.search(text)))


# A chat role's name where a sentence or a line ends, alone on its line or at the end: the next turn.
NEW_TURN = re.compile(r"(?:^|[\n.!?:]\s*)(?:user|assistant)\s*(?:\n|$)", re.IGNORECASE)
# A run of this many words of the instruction or the document, word for word, is copied back.
ECHO_RUN = 8
_WORD = re.compile(r"[\w']+")


def word_runs(text: str, run: int = ECHO_RUN) -> list[tuple[str, ...]]:
    """The text's runs of `run` words (lower case, punctuation left out)."""
    words = _WORD.findall(text.lower().replace("\u2019", "'"))
    return [tuple(words[i : i + run]) for i in range(len(words) - run + 1)]


@dataclass(frozen=True)
class CheckedDraft:
    """What the reply reports of a checked draft: the tries it took (the kept one among them), the facts
    asked, those the kept draft still misses, and whether it still turns a decline around."""

    tries: int
    kept_try: int
    asked: tuple[AskedFact, ...]
    missing: tuple[AskedFact, ...]
    turned_around: bool
    echoes: bool = False
    stances_missing: tuple[Stance, ...] = ()
    new_turn: bool = False

    def as_json(self) -> dict[str, Any]:
        return {
            "tries": self.tries,
            "kept_try": self.kept_try,
            "facts_asked": [fact.said for fact in self.asked],
            "facts_missing": [fact.said for fact in self.missing],
            "stances_missing": list(self.stances_missing),
            "declines_turned_around": self.turned_around,
            "copies_back": self.echoes,
            "writes_next_turn": self.new_turn,
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
        elif self.stances_missing:
            parts.append("it does not " + " or ".join(self.stances_missing) + " as asked")
        if self.echoes:
            parts.append("it copies words of the request or the document back")
        if self.new_turn:
            parts.append("it goes on into a turn of the chat")
        if parts and not (self.missing or self.turned_around or self.echoes or self.stances_missing or self.new_turn):
            parts.append(f"it carries the {len(self.asked)} facts asked" if self.asked else "it keeps the decline")
        return "; ".join(parts)


class CheckRecord:
    """Filled in by a checked draft as it runs (the drafter's tries), read by the reply once it is done."""

    def __init__(self) -> None:
        self.outcome: CheckedDraft | None = None
