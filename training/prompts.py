"""Varied drafting instructions: the kinds of text Sharpen drafts, for whom, about what, in what tone.

Narrow, consistent text is what a small model can learn on two CPU cores, so the instructions stay
within everyday writing (emails, notes, short paragraphs), but vary every slot so that a model trained
on the answers has to follow the instruction rather than memorise one letter.
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass
from typing import Any

KINDS = (
    "an email",
    "a short note",
    "a reply",
    "a message",
    "a paragraph",
    "an announcement",
    "a reminder",
    "an invitation",
    "a thank-you note",
    "an apology",
    "a short update",
    "a request",
)
RECIPIENTS = (
    "a colleague",
    "my manager",
    "the team",
    "a neighbour",
    "my landlord",
    "a friend",
    "a customer",
    "a teacher",
    "a client",
    "the parents' group",
    "a new employee",
    "my sister",
    "the building manager",
    "a supplier",
    "the book club",
)
TOPICS = (
    "moving the weekly meeting to Thursday",
    "a delayed delivery",
    "the office closing early on Friday",
    "a broken heating system",
    "the summer picnic",
    "a missed deadline",
    "the results of the survey",
    "a change in the project budget",
    "borrowing a ladder",
    "a new parking rule",
    "the quarterly report",
    "a lost package",
    "a birthday party next Saturday",
    "feedback on a draft presentation",
    "a noisy party last night",
    "a school trip",
    "a job interview next week",
    "the new coffee machine",
    "a refund for a cancelled order",
    "the holiday schedule",
    "a leaking tap in the kitchen",
    "a team lunch",
    "an overdue invoice",
    "the website being down this morning",
    "a volunteer day at the park",
    "a change of address",
    "a training course",
    "the printer on the second floor",
    "a late rent payment",
    "the launch of a new product",
    "a flight that was cancelled",
    "a recommendation letter",
    "the garden shared by the building",
    "a doctor's appointment",
    "the book we are reading this month",
    "a conference next month",
    "a welcome for a new colleague",
    "a power cut in the building",
    "a hiking trip",
    "the end of a long project",
)
TONES = ("friendly", "formal", "brief", "warm", "polite but firm", "cheerful", "apologetic", "professional")
LENGTHS = ("in two or three sentences", "in one short paragraph", "in about eighty words", "in two short paragraphs")


@dataclass(frozen=True)
class Instruction:
    id: int
    kind: str
    recipient: str
    topic: str
    tone: str
    length: str

    @property
    def text(self) -> str:
        return f"Write {self.kind} to {self.recipient} about {self.topic}. Make it {self.tone}, {self.length}."

    @property
    def teacher_message(self) -> str:
        return self.text

    def record(self) -> dict[str, Any]:
        return {**asdict(self), "text": self.text}


def instructions(count: int, seed: int = 0) -> list[Instruction]:
    """`count` instructions, different slot combinations, the same list for the same seed."""
    rng = random.Random(seed)
    seen: set[tuple[str, ...]] = set()
    made: list[Instruction] = []
    limit = len(KINDS) * len(RECIPIENTS) * len(TOPICS) * len(TONES) * len(LENGTHS)
    while len(made) < min(count, limit):
        slots = (rng.choice(KINDS), rng.choice(RECIPIENTS), rng.choice(TOPICS), rng.choice(TONES), rng.choice(LENGTHS))
        if slots in seen:
            continue
        seen.add(slots)
        made.append(Instruction(len(made), *slots))
    return made
