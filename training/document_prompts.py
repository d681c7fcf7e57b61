"""Instructions in the layouts the service builds for the editor: a draft into a document (Ctrl+D) and a
rewrite of a selection with an instruction (app/domain/context.py), for the teacher to answer.

The documents are the teacher's finished drafts (training split only), cut at a sentence or paragraph
end: the text before the cursor, and where a later part is kept, the text after it. The asks and the
subjects they name come from the open pools' training values. The selections to rewrite are those drafts'
paragraphs and short informal notes full of names and numbers, the kind of text users rewrite and the kind
whose facts a rewrite must keep; the notes draw from names, places and figures disjoint from the bench's
held-out paragraphs (bench/data/rewrite_paragraphs.txt).
"""

from __future__ import annotations

import random
import re
import string
from collections.abc import Mapping, Sequence

from app.domain.context import document_instruction, rewrite_instruction
from training.open_prompts import POOLS, OpenInstruction, held_out_value

DOCUMENT_FIRST_ID = 200_000
REWRITE_FIRST_ID = 300_000

DOCUMENT_ASKS = (
    "Write the next paragraph.",
    "Continue from here.",
    "Add a sentence about {subject}.",
    "Add a short paragraph about {event}.",
    "Write a closing paragraph.",
    "Add two or three sentences that explain {concept}.",
    "Mention {item} here, in a sentence or two.",
    "Write a sentence that leads into the next part.",
    "Add a short list of points about {task}.",
    "Finish this paragraph.",
    "Add a paragraph about {subject}, in the same tone.",
    "Write an opening sentence for this part.",
)
REWRITE_ASKS = (
    "more formal",
    "shorter",
    "as a list",
    "friendlier",
    "simpler",
    "more polite",
    "clearer",
    "more enthusiastic",
    "as bullet points",
    "more direct",
    "more concise",
    "warmer",
    "in plain English",
    "more professional",
)
NOTE_TEMPLATES = (
    "hi {name}, the {thing} meeting moved to {day} at {time}, room {room}. {name2} will bring the {figure} numbers.",
    "quick update: we sold {count} tickets so far, target is {count2}. {name} says the venue in {town} holds {count3}.",
    "{name} called, the delivery of {count} chairs comes {day} between {time} and {time2}. it costs {money} in total.",
    "reminder: {thing} review with {name} on {day}, {time}. bring the report, we spent {money} of the {money2} budget.",
    "so {name} can't do {day}, can we do {day2} at {time} instead? {name2} booked room {room} already.",
    "the {thing} repair is {money} plus {count} hours of work. {name} thinks a new one for {money2} is better.",
    "hey team, {name} starts on {day} as our new {role}. please meet in room {room} at {time} to say hello.",
    "train to {town} leaves at {time} from platform {room}, tickets {money} each. {name} booked for {count}.",
    "{name} here. the {thing} order #{number} arrived with {count} items missing. supplier is {name2} in {town}.",
    "note for {name}: the {thing} class moves to {day}, {time} to {time2}, and costs {money} for {count} weeks.",
)
NOTE_SLOTS: dict[str, tuple[str, ...]] = {
    "name": ("Jonas", "Amara", "Tomasz", "Leila", "Bruno", "Ingrid", "Kofi", "Mei", "Rafael", "Sofia", "Hugo", "Noor"),
    "name2": ("Elena", "Dmitri", "Aisha", "Pieter", "Chloe", "Omar", "Greta", "Yusuf", "Hana", "Lars"),
    "day": ("Monday", "Tuesday", "Wednesday", "Saturday", "Sunday"),
    "day2": ("Monday", "Tuesday", "Wednesday", "Saturday", "Sunday"),
    "time": ("9am", "9:30", "11:15", "2pm", "3:45pm", "7pm", "8:20"),
    "time2": ("12pm", "1:30pm", "5pm", "6:15pm", "9pm"),
    "room": ("2A", "7", "12C", "3", "19", "5B"),
    "thing": ("quarterly", "boiler", "website", "garden", "yoga", "design", "printer", "pottery", "safety"),
    "figure": ("Q1", "Q2", "Q4", "March", "sales", "survey"),
    "count": ("3", "12", "45", "60", "7", "150", "18"),
    "count2": ("200", "500", "80", "1,000", "90"),
    "count3": ("300", "1,200", "75", "640"),
    "money": ("45 euros", "$120", "260 pounds", "$1,850", "95 francs", "30 dollars"),
    "money2": ("$5,000", "12,000 euros", "3,400 pounds", "$900"),
    "town": ("Ghent", "Leeds", "Porto", "Bergen", "Kraków", "Tampere", "Galway"),
    "role": ("designer", "accountant", "site manager", "editor", "nurse"),
    "number": ("4471", "10932", "2290", "83115"),
}
# Where a draft may be cut: after a sentence's end or a paragraph break.
_CUTS = re.compile(r"(?<=[.!?])[\"')]?\s+|\n\s*\n")


def _slot_names(template: str) -> list[str]:
    return [name for _, name, _, _ in string.Formatter().parse(template) if name]


Slots = tuple[tuple[str, str], ...]


def _fill(template: str, pools: Mapping[str, Sequence[str]], rng: random.Random) -> tuple[str, Slots]:
    slots = tuple((name, rng.choice(pools[name])) for name in _slot_names(template))
    return template.format(**dict(slots)), slots


def cut_points(text: str) -> list[int]:
    """Offsets in `text` where a sentence or paragraph has ended (never the very end)."""
    return [m.end() for m in _CUTS.finditer(text) if 0 < m.end() < len(text.rstrip())]


def teacher_document_message(asked: str, before: str) -> str:
    """The teacher's layout for a draft into a document: the text, then the ask. Asked in the service's
    layout (document_instruction's headings), SmolLM2-135M echoed the headings or copied the document in 44
    of 48 drafts; asked so, in 25 (training/NOTES.md). The pair still learns the service's layout."""
    return f"{before}\n\n{asked} Reply with the new text only."


def document_instructions(
    count: int, documents: Sequence[str], *, seed: int = 0, first_id: int = DOCUMENT_FIRST_ID
) -> list[OpenInstruction]:
    """`count` drafts into a document: each a training document cut at a sentence end, the text after the
    cut either dropped (the cursor at the end) or kept from a later sentence on (the cursor in between)."""
    pools = {name: [v for v in values if not held_out_value(v)] for name, values in POOLS.items()}
    texts = [d for d in documents if not held_out_value(d) and len(cut_points(d)) >= 2]
    rng = random.Random(seed)
    made: list[OpenInstruction] = []
    seen: set[str] = set()
    attempts = 0
    while texts and len(made) < count and attempts < count * 20:
        attempts += 1
        document = rng.choice(texts)
        cuts = cut_points(document)
        first = rng.randrange(len(cuts) - 1) if rng.random() < 0.5 else len(cuts) - 1
        before = document[: cuts[first]].rstrip()
        later = cuts[first + 1 + rng.randrange(2) :] if rng.random() < 0.5 else []
        after = document[later[0] :].strip() if later else ""
        asked, slots = _fill(rng.choice(DOCUMENT_ASKS), pools, rng)
        text = document_instruction(asked, before, after)
        if text in seen:
            continue
        seen.add(text)
        record = (("ask", asked), *slots, ("before", before), ("after", after))
        made.append(
            OpenInstruction(first_id + len(made), "document", record, text, teacher_document_message(asked, before))
        )
    return made


def rewrite_instructions(
    count: int, paragraphs: Sequence[str], *, seed: int = 0, first_id: int = REWRITE_FIRST_ID
) -> list[OpenInstruction]:
    """`count` rewrites with an instruction: of the drafts' paragraphs (training split) and, for a third, of
    an informal note holding names and numbers."""
    selections = [p for p in paragraphs if not held_out_value(p)]
    rng = random.Random(seed)
    made: list[OpenInstruction] = []
    seen: set[str] = set()
    attempts = 0
    while len(made) < count and attempts < count * 20:
        attempts += 1
        slots: Slots = ()
        if selections and rng.random() < 2 / 3:
            selection = rng.choice(selections)
        else:
            selection, slots = _fill(rng.choice(NOTE_TEMPLATES), NOTE_SLOTS, rng)
        asked = rng.choice(REWRITE_ASKS)
        text = rewrite_instruction(asked, selection)
        if text in seen:
            continue
        seen.add(text)
        record = (("ask", asked), *slots, ("selection", selection))
        made.append(OpenInstruction(first_id + len(made), "rewrite-selection", record, text))
    return made


def paragraphs_of(texts: Sequence[str], *, longest: int = 700) -> list[str]:
    """The paragraphs of `texts` worth rewriting: two sentences or more, at most `longest` characters."""
    found: list[str] = []
    for text in texts:
        for paragraph in re.split(r"\n\s*\n", text):
            paragraph = paragraph.strip()
            if len(cut_points(paragraph)) >= 1 and 80 <= len(paragraph) <= longest:
                found.append(paragraph)
    return found
