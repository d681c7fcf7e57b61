"""Whether an instruction asks a draft to decline, and whether a draft turns that decline into an acceptance.

Kept simple on purpose: an instruction declines where it says so ("decline", "can't", "cannot make",
"unable", "say no", "turn down", "not able"); a draft turns the decline around where it reads as an
acceptance ("looking forward", "I'll be there", "happy to attend", not negated) and declines nothing.
"""

from __future__ import annotations

import re

_QUOTES = str.maketrans({"\u2019": "'", "\u2018": "'"})

_DECLINE_ASKED = re.compile(
    r"\b(?:declin\w*|can't|cannot|can not|unable|not able|won't be able|will not be able|say no|saying no|"
    r"turn(?:s|ing|ed)? (?:it |them |this |that |the \w+ )?down|refus\w*|won't make|not make it|won't attend|"
    r"not attend\w*|regret\w*|have to miss|will miss|pass on)\b",
    re.IGNORECASE,
)
# "can't wait" and "cannot wait" accept; so do "can't miss" and "cannot miss" where they occur.
_DECLINES = re.compile(
    r"\b(?:can't|cannot|can not)\b(?! wait| miss)|\b(?:unable|not able|won't be able|will not be able|declin\w*|"
    r"regret\w*|unfortunately|sadly|won't make|won't be (?:there|attending|joining|coming|able)|"
    r"will not be (?:there|attending|joining|coming)|not make it|not possible|have to (?:pass|miss|say no)|"
    r"will (?:have to )?miss|afraid (?:i|we)|not going to make|no longer)\b",
    re.IGNORECASE,
)
_ACCEPTS = re.compile(
    r"\b(?:looking forward|look forward|i'll be there|i will be there|we'll be there|we will be there|"
    r"see you (?:there|then|on)|(?:happy|glad|delighted|pleased|thrilled|excited) to (?:attend|accept|join|come|"
    r"be there)|i accept|we accept|count me in|can't wait|cannot wait|will attend|i'll attend|would love to "
    r"(?:come|attend|join)|i'd love to (?:come|attend|join)|i can make it|we can make it|i'll come|we'll come)\b",
    re.IGNORECASE,
)
# A negation just before an acceptance turns it around ("not looking forward", "never count me in").
_NEGATED = re.compile(r"\b(?:not|never|no longer|n't)\s*(?:\w+\s+){0,1}$", re.IGNORECASE)


def asks_to_decline(instruction: str) -> bool:
    """Whether the instruction asks the draft to decline (an invitation, a meeting, an offer)."""
    return bool(_DECLINE_ASKED.search(instruction.translate(_QUOTES)))


def acceptances(text: str) -> tuple[str, ...]:
    """The phrases of `text` that accept, less those a negation just before them turns around."""
    plain = text.translate(_QUOTES)
    return tuple(match.group(0) for match in _ACCEPTS.finditer(plain) if not _NEGATED.search(plain[: match.start()]))


def turns_decline_around(instruction: str, text: str) -> bool:
    """Whether `text` reads as an acceptance where `instruction` asked it to decline: an accepting phrase, not
    negated, and nothing that declines."""
    if not asks_to_decline(instruction):
        return False
    plain = text.translate(_QUOTES)
    return bool(acceptances(plain)) and not _DECLINES.search(plain)
