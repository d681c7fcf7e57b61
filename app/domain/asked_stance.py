"""The stance an instruction asks a draft to take (decline, accept, apologise), and whether a draft takes it.

Kept simple on purpose, a few phrases each way:
- an instruction declines where it says so ("decline", "can't", "cannot make", "unable", "say no", "turn
  down", "rather not"); it accepts where it says "accept", "say yes", "I'm in", "happy to help" and the like; it
  apologises where it says "apologise" or "say sorry". One that both declines and accepts asks neither.
- a draft takes a stance where it has a phrase of it: it declines with "can't", "unable", "unfortunately"...;
  it accepts with "looking forward", "I'll be there", "happy to attend"... not negated, and declines nothing;
  it apologises with "sorry", "apologise", "regret"... A draft that accepts where a decline was asked turns
  the decline around.
"""

from __future__ import annotations

import re
from typing import Literal

Stance = Literal["decline", "accept", "apologise"]

_QUOTES = str.maketrans({"\u2019": "'", "\u2018": "'"})

_DECLINE_ASKED = re.compile(
    r"\b(?:declin\w*|can't|cannot|can not|unable|not able|won't be able|will not be able|say no|saying no|"
    r"turn(?:s|ing|ed)? (?:it |them |this |that |the \w+ )?down|refus\w*|won't make|not make it|won't attend|"
    r"not attend\w*|have to miss|will miss|pass on|(?:don't|do not|won't|will not|can't|cannot) accept|"
    r"(?:'d|would) rather not|no thanks|not (?:be )?going ahead|won't (?:be )?go(?:ing)? ahead|won't be going|"
    r"not interested|not available|unavailable|can't do|cannot do|won't be coming)\b",
    re.IGNORECASE,
)
_ACCEPT_ASKED = re.compile(
    r"\b(?:accept\w*|say yes|saying yes|yes to|i'll be there|i will be there|i'll come|we'll come|count me in|"
    r"(?:happy|glad|delighted|love) to (?:come|attend|join|accept|help|take part|do it)|i can make it|"
    r"we can make it|works for me|works for us|suits? (?:me|us)|i'm in|we're in|go ahead|i'll do it|^yes)\b",
    re.IGNORECASE,
)
_APOLOGY_ASKED = re.compile(r"\b(?:apologi[sz]\w*|apology|say sorry|saying sorry|sorry)\b", re.IGNORECASE)

# "can't wait" and "cannot wait" accept; so does "can't miss".
_DECLINES = re.compile(
    r"\b(?:can't|cannot|can not)\b(?! wait| miss)|\b(?:unable|not able|won't be able|will not be able|declin\w*|"
    r"regret\w*|unfortunately|sadly|won't make|won't be (?:there|attending|joining|coming|able)|"
    r"will not be (?:there|attending|joining|coming)|not make it|not possible|have to (?:pass|miss|say no)|"
    r"will (?:have to )?miss|afraid (?:i|we)|not going to make|no longer|(?:'d|would) rather not|"
    r"not (?:be )?going ahead|won't (?:be )?go(?:ing)? ahead|decided not|not be going|won't be going|"
    r"not available|unavailable)\b",
    re.IGNORECASE,
)
_ACCEPTS = re.compile(
    r"\b(?:looking forward|look forward|i'll be there|i will be there|we'll be there|we will be there|"
    r"see you (?:there|then|on)|(?:happy|glad|delighted|pleased|thrilled|excited) to (?:attend|accept|join|come|"
    r"be there|confirm)|i accept|we accept|count me in|can't wait|cannot wait|will attend|i'll attend|"
    r"would love to (?:come|attend|join)|i'd love to (?:come|attend|join)|i can make it|we can make it|i'll come|"
    r"we'll come|works (?:for me|for us|well)|sounds (?:good|great|perfect)|yes|(?:happy|glad|delighted) to help|"
    r"i'm in|we're in|go ahead|suits (?:me|us))\b",
    re.IGNORECASE,
)
_APOLOGIES = re.compile(
    r"\b(?:sorry|apologi[sz]\w*|apology|apologies|regret\w*|my (?:mistake|fault)|our (?:mistake|fault)|"
    r"forgive)\b",
    re.IGNORECASE,
)
# A negation just before an acceptance turns it around ("not looking forward", "never count me in").
_NEGATED = re.compile(r"(?:\b(?:not|never|no longer)|n't)\s*(?:\w+\s+)?$", re.IGNORECASE)


def asked_stances(instruction: str) -> frozenset[Stance]:
    """The stances `instruction` asks the draft to take (none where it both declines and accepts)."""
    plain = instruction.translate(_QUOTES)
    stances: set[Stance] = set()
    declines = bool(_DECLINE_ASKED.search(plain))
    accepts = any(not _NEGATED.search(plain[: m.start()]) for m in _ACCEPT_ASKED.finditer(plain))
    if declines != accepts:
        stances.add("decline" if declines else "accept")
    if _APOLOGY_ASKED.search(plain):
        stances.add("apologise")
    return frozenset(stances)


def asks_to_decline(instruction: str) -> bool:
    """Whether the instruction asks the draft to decline (an invitation, a meeting, an offer)."""
    return "decline" in asked_stances(instruction)


def acceptances(text: str) -> tuple[str, ...]:
    """The phrases of `text` that accept, less those a negation just before them turns around."""
    plain = text.translate(_QUOTES)
    return tuple(match.group(0) for match in _ACCEPTS.finditer(plain) if not _NEGATED.search(plain[: match.start()]))


def takes(stance: Stance, text: str) -> bool:
    """Whether `text` takes `stance`: has a phrase that declines, accepts (not negated, declining nothing) or
    apologises."""
    plain = text.translate(_QUOTES)
    if stance == "decline":
        return bool(_DECLINES.search(plain))
    if stance == "accept":
        return bool(acceptances(plain)) and not _DECLINES.search(plain)
    return bool(_APOLOGIES.search(plain))


def turns_decline_around(instruction: str, text: str) -> bool:
    """Whether `text` reads as an acceptance where `instruction` asked it to decline: an accepting phrase, not
    negated, and nothing that declines."""
    return asks_to_decline(instruction) and takes("accept", text)


def stance_opener(stances: frozenset[Stance]) -> str:
    """Words a draft can open with that take the stances asked ("" for none): where a model's own drafts
    did not take the stance, a draft that starts with them does."""
    if "decline" in stances:
        return "I'm sorry, but I can't" if "apologise" in stances else "Unfortunately,"
    if "accept" in stances:
        return "Yes, and I'm sorry" if "apologise" in stances else "Yes,"
    return "I'm sorry" if "apologise" in stances else ""


def opens_sentence(before: str) -> bool:
    """Whether text written after `before` starts a sentence of its own (nothing before it, or a sentence or
    a line ended)."""
    return not before.strip() or before.rstrip(" \t").endswith("\n") or before.rstrip()[-1] in ".!?"
