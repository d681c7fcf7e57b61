"""How faithful a draft into a document is to what the user asked (bench/faithful_drafts.py): each score a
pure function of the draft and the case.

- facts kept: the share of the asked facts the draft states (any of each fact's alternatives);
- stance: a decline that declines, an acceptance that accepts, an apology that apologises;
- placeholders: "[Your Name]" and the like, a defect where the document names the people;
- copied back: a heading of the prompt's framing, or a long verbatim run of the document or the instruction;
- repeats: the share of word 3-grams already used (bench/embedded_quality.py's measure);
- length: tokens written against tokens asked.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Literal

from app.domain.context import continued_reply, document_instruction, rewrite_instruction

Stance = Literal["decline", "accept", "apologise", "none"]
StanceKept = Literal["kept", "flipped", "unclear"]
STANCES: tuple[Stance, ...] = ("decline", "accept", "apologise", "none")

# The phrases that keep each stance, and those that turn it into its opposite; a case adds its own.
DECLINE_KEEPS = (
    "can't",
    "cannot",
    "can not",
    "unable",
    "won't be able",
    "will not be able",
    "not able",
    "not be able",
    "have to decline",
    "must decline",
    "need to decline",
    "decline",
    "regret",
    "unfortunately",
    "won't make",
    "won't be there",
    "will not be there",
    "not going to make",
    "not possible",
    "afraid i",
    "have to pass",
    "have to miss",
    "will miss",
    "won't be joining",
    "won't be attending",
    "will not be attending",
)
DECLINE_FLIPS = (
    "looking forward to",
    "look forward to",
    "see you there",
    "happy to attend",
    "glad to attend",
    "delighted to attend",
    "pleased to attend",
    "i'll be there",
    "i will be there",
    "we'll be there",
    "we will be there",
    "count me in",
    "will attend",
    "i'll attend",
    "can't wait",
    "cannot wait",
    "happy to accept",
    "pleased to accept",
    "delighted to accept",
    "i accept",
)
# Not "happy to" or "glad to" alone: "I'm glad to hear that..." and "happy to help" open drafts that accept
# nothing.
ACCEPT_KEEPS = (
    "happy to accept",
    "happy to attend",
    "happy to join",
    "happy to come",
    "glad to accept",
    "glad to attend",
    "glad to join",
    "glad to come",
    "pleased to accept",
    "pleased to attend",
    "pleased to confirm",
    "delighted to",
    "i'd love to",
    "we'd love to",
    "would love to",
    "i accept",
    "we accept",
    "gladly accept",
    "definitely be there",
    "will be there",
    "i'll be there",
    "we'll be there",
    "i'll come",
    "we'll come",
    "i can make it",
    "we can make it",
    "count me in",
    "looking forward to",
    "look forward to",
    "see you",
    "can't wait",
    "sounds great",
    "sounds good",
    "works for me",
    "works for us",
    "yes",
    "will attend",
    "i'll attend",
)
ACCEPT_FLIPS = (
    "can't",
    "cannot",
    "can not",
    "unable",
    "won't be able",
    "will not be able",
    "not able",
    "not be able",
    "decline",
    "unfortunately",
    "regret",
    "have to pass",
    "won't make",
    "not possible",
    "afraid not",
)
APOLOGISE_KEEPS = (
    "sorry",
    "apologise",
    "apologize",
    "apologies",
    "apology",
    "apologising",
    "apologizing",
    "apologised",
    "apologized",
    "regret",
    "my mistake",
    "our mistake",
    "my fault",
    "our fault",
    "please forgive",
    "forgive me",
    "forgive us",
    "my bad",
)
APOLOGISE_FLIPS = (
    "not our fault",
    "not my fault",
    "no apology",
    "nothing to apologise",
    "nothing to apologize",
    "not sorry",
    "your fault",
    "your mistake",
    "not responsible",
    "you should have",
)
STANCE_PHRASES: dict[Stance, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "decline": (DECLINE_KEEPS, DECLINE_FLIPS),
    "accept": (ACCEPT_KEEPS, ACCEPT_FLIPS),
    "apologise": (APOLOGISE_KEEPS, APOLOGISE_FLIPS),
    "none": ((), ()),
}
# A run of this many words of the document or the instruction, word for word, is copied back.
COPIED_RUN = 8
# A placeholder: a short bracketed phrase that names what should be there ("[Your Name]", "<Recipient>",
# "{name}"), not a markdown link ("[text](url)").
PLACEHOLDER = re.compile(r"\[[A-Za-z][^\[\]\n]{0,38}\](?!\()|<[A-Za-z][^<>\n]{0,38}>|\{[A-Za-z][^{}\n]{0,38}\}")
_WORD = re.compile(r"[\w']+")
# Typographic quotes and dashes, as their plain forms.
_QUOTES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u201c": '"', "\u201d": '"', "\u2013": "-", "\u2014": "-"})


def normalised(text: str) -> str:
    """Lower case, typographic quotes and dashes made plain, every run of whitespace one space."""
    return " ".join(text.translate(_QUOTES).lower().split())


# After a phrase that ends in a number: am or pm ("7:30" in "7:30pm"), or not a word character.
_NUMBER_END = r"(?:(?=\s?[ap]\.?m\b)|(?!\w))"


@cache
def phrase_pattern(phrase: str) -> re.Pattern[str]:
    """A phrase as it may appear in normalised text: not inside a word (a time may carry am or pm), any run
    of whitespace as one space."""
    plain = normalised(phrase)
    body = r"\s+".join(re.escape(part) for part in plain.split(" "))
    end = _NUMBER_END if plain[-1:].isdigit() else r"(?!\w)"
    return re.compile(rf"(?<!\w){body}{end}")


def states(text: str, alternatives: Sequence[str]) -> bool:
    """Whether `text` states a fact: any of its alternatives, case-insensitive, not inside a word."""
    plain = normalised(text)
    return any(phrase_pattern(alternative).search(plain) for alternative in alternatives)


def facts_kept(text: str, facts: Sequence[Sequence[str]]) -> list[bool]:
    """For each asked fact, whether the draft states it."""
    return [states(text, alternatives) for alternatives in facts]


@dataclass(frozen=True)
class StanceVerdict:
    verdict: StanceKept
    keeping: tuple[str, ...]  # the phrases found that keep the stance
    flipping: tuple[str, ...]  # and those that turn it


def _matches(plain: str, phrases: Iterable[str]) -> list[tuple[int, int, str]]:
    return [(m.start(), m.end(), phrase) for phrase in phrases for m in phrase_pattern(phrase).finditer(plain)]


def _outside(found: list[tuple[int, int, str]], other: list[tuple[int, int, str]]) -> tuple[str, ...]:
    """The phrases of `found` not lying inside a longer phrase of `other` ("can't" in "can't wait")."""
    return tuple(
        dict.fromkeys(
            phrase
            for start, end, phrase in found
            if not any(s <= start and end <= e and e - s > end - start for s, e, _ in other)
        )
    )


def stance_kept(
    text: str, stance: Stance, keeps: Sequence[str] = (), flips: Sequence[str] = ()
) -> StanceVerdict | None:
    """Whether the draft keeps the asked stance (None for none asked): kept where a keeping phrase is found,
    flipped where only flipping ones are, unclear where neither is. A phrase inside a longer phrase of the
    other side does not count ("can't" in "can't wait", "our fault" in "not our fault")."""
    if stance == "none":
        return None
    base_keeps, base_flips = STANCE_PHRASES[stance]
    plain = normalised(text)
    keeping_at = _matches(plain, (*base_keeps, *keeps))
    flipping_at = _matches(plain, (*base_flips, *flips))
    keeping, flipping = _outside(keeping_at, flipping_at), _outside(flipping_at, keeping_at)
    verdict: StanceKept = "kept" if keeping else "flipped" if flipping else "unclear"
    return StanceVerdict(verdict, keeping, flipping)


def placeholders(text: str) -> list[str]:
    """The placeholders in a draft ("[Your Name]", "<Recipient>", "{name}")."""
    return PLACEHOLDER.findall(text)


_SENTINEL = "\x00"


@cache
def framing_lines() -> tuple[str, ...]:
    """The lines the drafters frame a request with (document_instruction's headings, continued_reply's
    sentence, rewrite_instruction's words), normalised and without their closing punctuation: read from the
    functions that write them, with stand-ins for what the user gave."""
    framed = (
        document_instruction(_SENTINEL, _SENTINEL, _SENTINEL),
        continued_reply(_SENTINEL, _SENTINEL, _SENTINEL).request,
        rewrite_instruction(_SENTINEL, _SENTINEL),
    )
    lines = []
    for text in framed:
        for piece in text.split(_SENTINEL):
            for line in piece.splitlines():
                plain = normalised(line).strip(" .:;,()")
                if len(plain.split()) >= 3:
                    lines.append(plain)
    return tuple(dict.fromkeys(lines))


def _word_runs(text: str, n: int) -> list[tuple[str, ...]]:
    """The text's runs of `n` words, in order (lower case, punctuation left out)."""
    words = _WORD.findall(normalised(text))
    return [tuple(words[i : i + n]) for i in range(len(words) - n + 1)]


def copied_back(draft: str, before: str, after: str, instruction: str, run: int = COPIED_RUN) -> str | None:
    """What of the prompt the draft copies back, or None: a line of the framing ("the document, up to where
    your text goes"), or a run of `run` words word for word from the document before or after the cursor or
    from the instruction."""
    plain = normalised(draft)
    for line in framing_lines():
        if line in plain:
            return f"framing: {line}"
    drafted = _word_runs(draft, run)
    for source, text in (("before", before), ("after", after), ("instruction", instruction)):
        theirs = set(_word_runs(text, run))
        shared = next((words for words in drafted if words in theirs), None)
        if shared is not None:
            return f"{source}: {' '.join(shared)}"
    return None


def length_ratio(written_tokens: int, asked_tokens: int) -> float:
    """Tokens written against tokens asked."""
    return written_tokens / asked_tokens if asked_tokens else 0.0
