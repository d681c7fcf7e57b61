"""Drafts into a document whose instruction is a list of things to say, each said in the draft in turn.

The kinds in writing_cases.py each follow one template; a writer's real instructions are lists ("decline;
propose Friday at 10; ask for the figures; my number is ..."), and a small model has to learn to carry each
item into a sentence of the letter. Here a case draws a situation (whose letter it is and why), then two to
six clauses from that situation's menu, each with its own ways of being asked for and of being said, joined
as writers join them. The facts of each clause appear once in the target; a decline declines.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from training.writing_cases import (
    EVENTS,
    FIRST_NAMES,
    ITEMS_TO_SEND,
    PLACES,
    PRODUCTS,
    SURNAMES,
    WEEKDAYS,
    WritingCase,
    _code,
    _date,
    _Letter,
    _sum,
    _time,
    occurrences,
    shares_words,
)


@dataclass(frozen=True)
class Clause:
    asks: tuple[str, ...]  # how the writer asks for it ({slot}s filled in)
    says: tuple[str, ...]  # how the draft says it
    facts: tuple[str, ...]  # the slots whose values the draft must state
    stance: str = "none"


def _slots(rng: random.Random) -> dict[str, str]:
    day, other = rng.sample((*WEEKDAYS, "Saturday"), 2)
    return {
        "day": day,
        "other_day": other,
        "date": _date(rng),
        "time": _time(rng),
        "place": rng.choice(PLACES),
        "item": rng.choice(ITEMS_TO_SEND).removeprefix("the "),
        "sum": _sum(rng),
        "code": _code(rng, 2, 4, "-"),
        "digits": _code(rng, 0, 4),
        "phone": f"07{_code(rng, 0, 3)} {_code(rng, 0, 6)}",
        "person": f"{rng.choice(FIRST_NAMES)} {rng.choice(SURNAMES)}",
        "product": rng.choice(PRODUCTS),
        "percent": rng.choice(("10%", "15%", "20%", "25%")),
        "count": str(rng.randint(3, 40)),
    }


DECLINE = Clause(
    ("I can't make {day}", "say no to {day}", "decline {day}", "{day} doesn't work for me"),
    ("Unfortunately I can't make {day}.", "I'm afraid I can't do {day}.", "Sadly I won't be able to make it on {day}."),
    ("day",),
    "decline",
)
ACCEPT = Clause(
    ("yes to {day}", "accept, {day} is fine", "I'll come on {day}", "confirm {day}"),
    ("I'm pleased to confirm {day}.", "Yes, I'll be there on {day}.", "Count me in for {day}."),
    ("day",),
    "accept",
)
APOLOGISE = Clause(
    ("apologise for the mix-up", "say sorry for the delay", "apologise first"),
    ("I'm sorry for the mix-up.", "I apologise for the delay.", "Please accept my apologies."),
    (),
    "apologise",
)
PROPOSE = Clause(
    ("propose {other_day} at {time} instead", "suggest {other_day} at {time}", "offer {other_day}, {time}"),
    ("Could we do {other_day} at {time} instead?", "Would {other_day} at {time} suit you?",
     "I could manage {other_day} at {time}."),
    ("other_day", "time"),
)  # fmt: skip
ASK_ITEM = Clause(
    ("ask for the {item}", "ask them to send the {item}", "I need the {item}"),
    ("Could you send me the {item}?", "Please send over the {item} when you can.", "I'd be grateful for the {item}."),
    ("item",),
)
DEADLINE = Clause(
    ("by {date} at the latest", "the deadline is {date}", "reply by {date}"),
    ("Please reply by {date}.", "The deadline is {date}.", "I'd need to hear back by {date}."),
    ("date",),
)
REFERENCE = Clause(
    ("my reference is {code}", "quote reference {code}", "mention reference {code}"),
    ("My reference is {code}.", "For your records, the reference is {code}.", "Please quote {code}."),
    ("code",),
)
PHONE = Clause(
    ("my number is {phone}", "give my mobile, {phone}", "they can call me on {phone}"),
    ("You can reach me on {phone}.", "My number is {phone}.", "Feel free to call me on {phone}."),
    ("phone",),
)
ACCOUNT = Clause(
    ("pay it into the account ending {digits}", "the money goes to my account ending {digits}"),
    ("Please pay it into my account ending {digits}.", "The account to pay into ends in {digits}."),
    ("digits",),
)
AMOUNT = Clause(
    ("the total is {sum}", "it costs {sum}", "mention the {sum}"),
    ("The total comes to {sum}.", "It costs {sum}.", "The amount is {sum}."),
    ("sum",),
)
MEET = Clause(
    ("meet at {place} at {time}", "we meet in {place}, {time}", "{place} at {time}"),
    ("Let's meet in {place} at {time}.", "We'll meet at {place} at {time}.", "The meeting point is {place} at {time}."),
    ("place", "time"),
)
ATTACHED = Clause(
    ("I've attached the {item}", "say the {item} is attached", "attach the {item}"),
    ("I've attached the {item}.", "Please find the {item} attached.", "The {item} is attached."),
    ("item",),
)
INTRODUCE = Clause(
    ("{person} will take over", "introduce {person}, who takes over from me", "hand over to {person}"),
    ("{person} will take over from me.", "From now on {person} will look after this.", "Please welcome {person}."),
    ("person",),
)
DISCOUNT = Clause(
    ("give code {code} for {percent} off", "offer {percent} off with {code}"),
    ("Please use code {code} for {percent} off your next order.", "Code {code} gives you {percent} off."),
    ("code", "percent"),
)
COUNT = Clause(
    ("we need {count} of them", "order {count}", "there will be {count} of us"),
    ("We'll need {count} in total.", "Please plan for {count}.", "That makes {count}."),
    ("count",),
)
ON_DATE = Clause(
    ("it happens on {date}", "the date is {date}", "on {date}"),
    ("It takes place on {date}.", "The date is {date}.", "This is on {date}."),
    ("date",),
)

# Situations: how the letter begins, and the clauses a writer of it may ask for (at most one with a stance).
SITUATIONS: tuple[tuple[tuple[str, ...], tuple[Clause, ...], tuple[Clause, ...]], ...] = (
    (
        ("Thanks for the invitation to the planning meeting.", "Thanks for organising the review.",
         "I got your message about next week's session."),
        (DECLINE, ACCEPT),
        (PROPOSE, ASK_ITEM, DEADLINE, PHONE, ATTACHED, MEET),
    ),
    (
        ("Thank you for your order.", "Thanks for getting in touch about your {product}.",
         "I'm following up on your enquiry."),
        (APOLOGISE,),
        (AMOUNT, DISCOUNT, REFERENCE, PHONE, ON_DATE, ACCOUNT),
    ),
    (
        ("I'm writing about the invoice you sent.", "Thanks for the quote.", "I've had a look at the figures."),
        (ACCEPT, DECLINE),
        (AMOUNT, ACCOUNT, REFERENCE, DEADLINE, ASK_ITEM, PHONE),
    ),
    (
        ("A few details for everyone about the {event}.", "Here are the plans for the {event}.",
         "Quick update on the {event}."),
        (),
        (ON_DATE, MEET, COUNT, AMOUNT, DEADLINE, PHONE, INTRODUCE),
    ),
    (
        ("I'm handing over the project this month.", "As you know, I'm moving to another team.",
         "Some news about the account."),
        (),
        (INTRODUCE, ASK_ITEM, ATTACHED, DEADLINE, PHONE, MEET),
    ),
)  # fmt: skip

_JOINERS = ("; ", ", ", ". ", ", and ", " - ")


def clause_case(rng: random.Random) -> WritingCase:
    openings, stances, menu = rng.choice(SITUATIONS)
    letter = _Letter.drawn(rng)
    slots = _slots(rng)
    event = rng.choice(EVENTS)[0]
    opening = rng.choice(openings).format(event=event, **slots)
    chosen = rng.sample(menu, rng.randint(2, min(5, len(menu))))
    if stances and rng.random() < 0.7:
        stance_clause = rng.choice(stances)
        chosen = [stance_clause, *chosen] if stance_clause.stance != "apologise" or rng.random() < 0.7 else chosen
    asks: list[str] = []
    says: list[str] = []
    facts: list[str] = []
    for clause in chosen:
        asks.append(rng.choice(clause.asks).format(**slots))
        says.append(rng.choice(clause.says).format(**slots))
        facts.extend(slots[name] for name in clause.facts)
    lead = rng.choice(("", "", "the rest of my reply: ", "reply: ", "say ", "Write that "))
    instruction = lead + asks[0]
    for ask in asks[1:]:
        joiner = rng.choice(_JOINERS)
        instruction += joiner + (ask[:1].upper() + ask[1:] if joiner == ". " else ask)
    if rng.random() < 0.5:
        instruction += "."
    stance = next((clause.stance for clause in chosen if clause.stance != "none"), "none")
    before = f"{letter.greeting}\n\n{opening}"
    cursor = rng.random()
    if cursor < 0.4:
        before, target = before + "\n\n", " ".join(says)
    elif cursor < 0.6:
        before, target = before + " ", " ".join(says)
    else:
        target = rng.choice(("\n\n", " ")) + " ".join(says)
    after = "" if rng.random() < 0.4 else f"\n\n{letter.sign_off}\n{letter.me}"
    unique = tuple(dict.fromkeys(facts))
    # A value drawn twice would be said twice, and a clause said as it was asked would teach copying: draw again.
    if any(occurrences(fact, target) != 1 for fact in unique) or shares_words(target, instruction):
        return clause_case(rng)
    first = target.lstrip()
    target = target[: len(target) - len(first)] + first[:1].upper() + first[1:] if first else target
    return WritingCase(
        "clauses", before, after, instruction, target, unique, stance, (letter.to, letter.me, slots["person"])
    )


def clause_cases(count: int, seed: int = 0) -> list[WritingCase]:
    """`count` clause cases, each with its own generator state (a set extends without changing)."""
    return [clause_case(random.Random(f"clauses:{seed}:{index}")) for index in range(count)]
