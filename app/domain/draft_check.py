"""What a draft is checked against before it is shown: the facts its instruction asks for, most of the things
it is about (its content words), that it does not copy the instruction or the document back (a draft that
echoes the instruction carries every fact asked; one that recites the words asked for as a bare list says
none of them), that it leaves no placeholder to fill in ("[Your Name]"),
and that it takes the stance asked (declines, accepts, apologises; a decline not turned into an
acceptance). The AR drafter drafts again while a draft fails and keeps the best
(app/orchestration/drafters.py); the reply says how many tries it took and what is still missing."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from app.domain.asked_facts import AskedFact, asked_facts, missing_facts
from app.domain.asked_stance import Stance, asked_stances, takes, turns_decline_around
from app.domain.asked_topics import AskedTopic, asked_topics, stem


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
    topics_missing: tuple[AskedTopic, ...] = ()
    # Bracketed stand-ins for what the writer should fill in ("[Your Name]") that the prompt did not have.
    placeholders: tuple[str, ...] = ()

    @property
    def mentions_enough(self) -> bool:
        """Whether it mentions every content word asked. A word said another way ("the tenancy" for "the lease")
        fails and the tries go on, but the best draft is kept all the same; passing three quarters of them let
        drafts that left a thing asked out pass untried again (bench/faithful_drafts.py's held-out cases: 131 of
        165 facts at three quarters, 134 at all, the same stances and waits)."""
        return not self.topics_missing

    @property
    def passed(self) -> bool:
        failed = self.missing or self.turned_around or self.echoes or self.stances_missing or self.new_turn
        return not failed and not self.placeholders and self.mentions_enough

    @property
    def rank(self) -> tuple[int, int, int, int]:
        """Higher is better: a draft of its own first (no copying back, no next turn, no placeholder), then the
        stance not turned around, then the stances taken, then fewer facts and content words left out."""
        own = 0 if self.echoes or self.new_turn or self.placeholders else 1
        left_out = len(self.missing) + len(self.topics_missing)
        return (own, 0 if self.turned_around else 1, -len(self.stances_missing), -left_out)


@dataclass(frozen=True)
class DraftChecks:
    """What a draft for `instruction` must do: carry `facts`, mention every one of `topics`, take the
    `stances` asked, and copy no run of ECHO_RUN words of the instruction or of the document (`echoed`) back."""

    instruction: str
    facts: tuple[AskedFact, ...]
    stances: frozenset[Stance]
    echoed: frozenset[tuple[str, ...]] = field(default=frozenset(), repr=False)
    topics: tuple[AskedTopic, ...] = ()
    # The placeholders the instruction or the document have themselves: a draft may keep them.
    given_placeholders: frozenset[str] = frozenset()

    @classmethod
    def of(cls, instruction: str, document: str = "") -> DraftChecks:
        """The checks for a draft asked by `instruction`, written into `document` (the text around the cursor).
        Its content words are checked only in a document: there an instruction lists what to say, while an
        open prompt's words name a subject the drafts keep to anyway (bench/open_prompts_ar.py: on topic 19
        of 20 unchecked, 20 of 20 checked at 2.5 times the time)."""
        runs = frozenset(word_runs(instruction)) | frozenset(word_runs(document))
        facts = asked_facts(instruction)
        topics = asked_topics(instruction, facts) if document.strip() else ()
        given = frozenset(PLACEHOLDER.findall(instruction)) | frozenset(PLACEHOLDER.findall(document))
        return cls(instruction, facts, asked_stances(instruction), runs, topics, given)

    @property
    def checks_anything(self) -> bool:
        return bool(self.facts) or bool(self.stances) or bool(self.topics)

    def verdict(self, text: str) -> Verdict:
        echoes = any(run in self.echoed for run in word_runs(text)) or self.recites(text)
        not_taken = tuple(stance for stance in sorted(self.stances) if not takes(stance, text))
        turned = turns_decline_around(self.instruction, text)
        unmentioned = tuple(topic for topic in self.topics if not topic.carried_by(text))
        return Verdict(
            missing_facts(text, self.facts),
            turned,
            echoes,
            not_taken,
            bool(NEW_TURN.search(text)),
            unmentioned,
            tuple(found for found in PLACEHOLDER.findall(text) if found not in self.given_placeholders),
        )

    def recites(self, text: str) -> bool:
        """Whether `text` says RECITED_RUN or more of the words asked for as a bare list ("Please quote: left,
        side, gate, open, fit, free"): a reminder of what a draft left out, copied back rather than said. A
        list the instruction has itself ("towels, goggles, caps, locks") may be said as a list."""
        asked = {stem(topic.said) for topic in self.topics} | {_item(fact.said) for fact in self.facts}
        own_lists = [set(_listed(match)) for match in _LIST.findall(self.instruction)]
        for match in _LIST.findall(text):
            recited = {item for item in _listed(match) if item in asked}
            if len(recited) >= RECITED_RUN and not any(len(recited & own) >= RECITED_RUN for own in own_lists):
                return True
        return False


# A run of this many of the words asked for, one after another between commas, is recited, not written.
RECITED_RUN = 4
_LIST = re.compile(rf"[^\s,]+(?:,[ \t]*[^\s,]+){{{RECITED_RUN - 1},}}")


def _item(word: str) -> str:
    return stem(word.strip(" .;:!?\"'()\u201c\u201d"))


def _listed(run: str) -> list[str]:
    return [_item(word) for word in run.split(",")]


# A chat role's name where a sentence or a line ends, alone on its line or at the end: the next turn.
NEW_TURN = re.compile(r"(?:^|[\n.!?:]\s*)(?:user|assistant)\s*(?:\n|$)", re.IGNORECASE)
# A placeholder: a short bracketed phrase naming what should be there ("[Your Name]", "<Recipient>", "{date}"),
# not a markdown link ("[text](url)").
PLACEHOLDER = re.compile(r"\[[A-Za-z][^\[\]\n]{0,38}\](?!\()|<[A-Za-z][^<>\n]{0,38}>|\{[A-Za-z][^{}\n]{0,38}\}")
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
    topics: tuple[AskedTopic, ...] = ()
    topics_missing: tuple[AskedTopic, ...] = ()
    placeholders: tuple[str, ...] = ()

    @property
    def mentions_enough(self) -> bool:
        return not self.topics_missing

    def as_json(self) -> dict[str, Any]:
        return {
            "tries": self.tries,
            "kept_try": self.kept_try,
            "facts_asked": [fact.said for fact in self.asked],
            "facts_missing": [fact.said for fact in self.missing],
            "topics_asked": [topic.said for topic in self.topics],
            "topics_missing": [topic.said for topic in self.topics_missing],
            "stances_missing": list(self.stances_missing),
            "declines_turned_around": self.turned_around,
            "copies_back": self.echoes,
            "writes_next_turn": self.new_turn,
            "placeholders": list(self.placeholders),
        }

    def note(self) -> str:
        """One line for the user ("" where the first draft carried everything asked)."""
        parts = []
        if self.tries > 1:
            parts.append(f"drafted {self.tries} times, kept try {self.kept_try}")
        if self.missing:
            parts.append("still missing " + ", ".join(f'"{fact.said}"' for fact in self.missing))
        if not self.mentions_enough:
            parts.append("it does not mention " + ", ".join(f'"{topic.said}"' for topic in self.topics_missing))
        if self.turned_around:
            parts.append("it reads as an acceptance where a decline was asked")
        elif self.stances_missing:
            parts.append("it does not " + " or ".join(self.stances_missing) + " as asked")
        if self.echoes:
            parts.append("it copies words of the request or the document back")
        if self.new_turn:
            parts.append("it goes on into a turn of the chat")
        if self.placeholders:
            parts.append("it leaves " + ", ".join(self.placeholders) + " to fill in")
        failed = self.missing or self.turned_around or self.echoes or self.stances_missing or self.new_turn
        failed = failed or bool(self.placeholders)
        if parts and not failed and self.mentions_enough:
            parts.append(f"it carries the {len(self.asked)} facts asked" if self.asked else "it keeps the stance asked")
        return "; ".join(parts)


class CheckRecord:
    """Filled in by a checked draft as it runs (the drafter's tries), read by the reply once it is done."""

    def __init__(self) -> None:
        self.outcome: CheckedDraft | None = None
