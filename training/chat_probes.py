"""The conversations the chat probes ask (bench/chat_recall.py), held out of the writing adapter's chat turns
(training/chat_turns.py): no conversation it learns from holds one of these turns, names or values
(tests/test_training/test_chat_turns.py checks), so the probes measure what it carries over."""

from __future__ import annotations

import re

NAMES = ("Ana", "Tom", "Priya", "Kwame", "Lucia", "Ben")
NAME_TURNS = ("My name is {v}.", "Nice to meet you, {v}.", "What is my name?")

# (kind, told, acknowledged, asked, values)
FACTS = (
    (
        "city",
        "I grew up in {v} and still live there.",
        "That sounds like a good place to call home.",
        "In which city do I live?",
        ("Tbilisi", "Winnipeg", "Cork", "Lyon", "Osaka", "Adelaide"),
    ),
    (
        "kitten",
        "We adopted a kitten last week and named her {v}.",
        "What a lovely thing to do.",
        "What did we name the kitten?",
        ("Pickle", "Juniper", "Waffles", "Socks", "Pepper", "Clementine"),
    ),
    (
        "job",
        "These days I earn my living as a {v}.",
        "That must keep you busy.",
        "What do I do for a living?",
        ("beekeeper", "surveyor", "welder", "florist", "optician", "glassblower"),
    ),
    (
        "code",
        "The code for the garden gate is {v}.",
        "Thanks, I have it.",
        "What is the code for the garden gate?",
        ("4821", "7305", "1962", "5548", "3019", "8876"),
    ),
)


def conversation(told: str, acknowledged: str, asked: str, value: str) -> list[dict[str, str]]:
    return [
        {"role": "user", "content": told.replace("{v}", value)},
        {"role": "assistant", "content": acknowledged.replace("{v}", value)},
        {"role": "user", "content": asked.replace("{v}", value)},
    ]


def probes() -> dict[str, list[tuple[str, str, list[dict[str, str]]]]]:
    """Each set's (kind, value, conversation) rows."""
    names = [("name", name, conversation(*NAME_TURNS, name)) for name in NAMES]
    facts = [
        (kind, value, conversation(told, acknowledged, asked, value))
        for kind, told, acknowledged, asked, values in FACTS
        for value in values
    ]
    return {"names": names, "facts": facts}


def probed_words() -> tuple[str, ...]:
    """Every name and value the probes ask about."""
    return (*NAMES, *(value for *_, values in FACTS for value in values))


def probed_phrases() -> tuple[str, ...]:
    """The probes' turns less their values (lower case): "my name is", "what is my name?", "i grew up in"..."""
    texts = [*NAME_TURNS, *(text for _, *turns, _ in FACTS for text in turns)]
    parts = (part.strip(" .,").lower() for text in texts for part in text.split("{v}"))
    return tuple(part for part in parts if len(part) > 3)


def mentions_probe(text: str) -> bool:
    """Whether `text` holds a probe's name or value (as a word) or a phrase of its turns."""
    words = {word.lower() for word in re.findall(r"[\w']+", text)}
    lowered = text.lower()
    return bool(words & {word.lower() for word in probed_words()}) or any(p in lowered for p in probed_phrases())
