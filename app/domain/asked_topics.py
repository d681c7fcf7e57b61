"""What an instruction is about beyond the facts app/domain/asked_facts.py reads: its content words ("the
lease", "cats", "the spare key", "blackbirds nesting"), and whether a text mentions each.

A content word is any word of the instruction that is not a function word, a word that only tells the
draft what to do ("say", "tell", "ask", "apologise"), how to sound ("polite", "short") or what form to take
("email", "reply"), and not part of a fact the patterns already read (names, days, times, sums...). A text
mentions one where it has a word of the same stem: "cat" mentions "cats", "nested" mentions "nesting",
"moving" mentions "move". No synonym counts, so a text can say a thing without mentioning its word: the
draft check asks for most of them, not all (app/domain/draft_check.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from app.domain.asked_facts import AskedFact

# Words that carry no content of their own: articles, pronouns, auxiliaries, conjunctions, prepositions,
# quantifiers and the commonest adverbs.
_FUNCTION_WORDS = """
a an the and or but nor so yet if then than that this these those there here what which who whom whose when
where why how all any both each every few more most other some such no not only own same too very just also
even still again ever never always often once now soon later already about above across after against along
among around at before behind below beneath beside between beyond by down during except for from in inside
into like near of off on onto out outside over past since through throughout till to toward towards under
until up upon with within without via per as because while though although unless whether either neither
i me my mine myself we us our ours ourselves you your yours yourself yourselves he him his himself she her
hers herself it its itself they them their theirs themselves one ones someone somebody something anyone
anybody anything everyone everybody everything nobody nothing none am is are was were be been being have has
had having do does did doing done will would shall should can could may might must ought let lets let's get
gets got getting go goes going went gone make makes made making i'm i'll i've i'd you're you'll you've you'd
he's she's it's we're we'll we've we'd they're they'll they've they'd that's there's here's what's who's
isn't aren't wasn't weren't hasn't haven't hadn't doesn't don't didn't won't wouldn't shan't shouldn't can't
cannot couldn't mustn't mightn't needn't ok okay yes yeah please thanks thank really quite rather much many
lot lots bit well back way instead sure
"""
# Words that tell the draft what to do rather than what to say: asking, telling, the stance asked, and
# plain verbs of saying.
_DIRECTION_WORDS = """
say says said saying tell tells told telling ask asks asked asking mention mentions mentioned mentioning note
notes noting add adds adding include includes including write writes wrote writing written draft drafts
reply replies replying respond responds responding answer answers know knows explain explains explaining
remind reminds reminding inform informs informing state states stating suggest suggests suggesting propose
proposes proposing offer offers offering request requests requesting want wants wanted need needs needed
wish hope hopes give gives gave giving keep keeps kept put puts send sends sent sending
apologise apologises apologised apologising apologize apologizes apologized apologizing apology apologies
sorry decline declines declined declining accept accepts accepted accepting refuse refuses refused
confirm confirms confirmed confirming agree agrees agreed thanking welcome invite invites
inviting announce announces announcing come comes coming came take takes taking took see sees seeing saw
seen look looks looking think thinks feel feels try tries trying use uses using seem seems happen happens
rest end start finish part first last next point
"""
# How the draft should sound and what form it takes: a draft need not name them.
_STYLE_WORDS = """
short shorter long longer brief briefly concise polite politely firm firmly friendly warm warmly kind kindly
formal informal casual cheerful upbeat positive professional clear clearly simple simply plain gentle
gently nice nicely happy glad pleased delighted keen fine great good best lovely
email emails mail letter letters message messages text paragraph paragraphs sentence sentences
line lines word words post update
"""
STOP_WORDS = frozenset((_FUNCTION_WORDS + _DIRECTION_WORDS + _STYLE_WORDS).split())
_TOKEN = re.compile(r"[A-Za-z][A-Za-z'\u2019-]*")
# Suffixes a stem drops, the longest that fits first; then a final "e" ("move" and "moving" meet at "mov").
_SUFFIXES = ("ings", "ing", "ies", "ied", "ed", "es", "s", "'s")
_MIN_STEM = 3


def stem(word: str) -> str:
    """A word's stem for matching: lower case, one inflection and a final "e" left out."""
    plain = word.lower().replace("\u2019", "'").strip("'-")
    for suffix in _SUFFIXES:
        if plain.endswith(suffix) and len(plain) - len(suffix) >= _MIN_STEM:
            plain = plain[: -len(suffix)] + ("y" if suffix in ("ies", "ied") else "")
            break
    if plain.endswith("e") and len(plain) > _MIN_STEM:
        plain = plain[:-1]
    return plain


@dataclass(frozen=True)
class AskedTopic:
    """One content word of the instruction, as it says it."""

    said: str

    def carried_by(self, text: str) -> bool:
        """Whether `text` has a word of this one's stem."""
        wanted = stem(self.said)
        return any(stem(word) == wanted for word in _TOKEN.findall(text))


def asked_topics(instruction: str, facts: Iterable[AskedFact] = ()) -> tuple[AskedTopic, ...]:
    """The content words of `instruction` not part of `facts`, each once (by stem), in the order it says them."""
    in_facts = {word.lower() for fact in facts for word in _TOKEN.findall(fact.said)}
    topics: dict[str, AskedTopic] = {}
    for match in _TOKEN.finditer(instruction):
        word = match.group(0).replace("\u2019", "'").rstrip("'-")
        plain = re.sub(r"'s$", "", word.lower())
        if len(plain) < _MIN_STEM or plain in STOP_WORDS or word.lower() in STOP_WORDS or plain in in_facts:
            continue
        if "'" in plain:  # a contraction the lists do not hold ("shouldn't've")
            continue
        topics.setdefault(stem(plain), AskedTopic(plain))
    return tuple(topics.values())
