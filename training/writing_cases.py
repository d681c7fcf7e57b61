"""Drafts into a document made for faithfulness: documents, instructions and the text that belongs at the
cursor, composed from pools by the project's own code, never by a model.

Every case says what a writer asks (facts: days, times, sums, names, codes; a stance: decline, accept,
apologise or none) and its target says exactly that: each fact asked appears once, a decline declines, the
people are those the document names, and nothing of the prompt is echoed. Phrasings, orders, openings and
lengths are drawn from many alternatives so that a small model learns to carry an instruction's content
into the document rather than to recite a template.

Kinds here are the training kinds; the benchmark's held-out kinds (bench/data/faithful_cases.toml's
`held_out_kinds`) are never made.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

STANCES = ("decline", "accept", "apologise", "none")


@dataclass(frozen=True)
class WritingCase:
    kind: str
    before: str  # the document up to the cursor (the target goes on from it: before + target reads right)
    after: str  # the document after the cursor ("" when the cursor is at its end)
    instruction: str  # what the writer typed in the draft box
    target: str  # the text that belongs at the cursor
    facts: tuple[str, ...]  # each appears in the target exactly once
    stance: str = "none"
    names: tuple[str, ...] = field(default=())  # the people the document names

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


FIRST_NAMES = (
    "Priya",
    "Tom",
    "Aisha",
    "Marco",
    "Yuki",
    "Sam",
    "Elena",
    "Kwame",
    "Sofia",
    "Liam",
    "Mei",
    "Jonas",
    "Fatima",
    "Diego",
    "Hannah",
    "Ravi",
    "Chloe",
    "Oskar",
    "Nadia",
    "Ben",
    "Ines",
    "Tariq",
    "Lena",
    "Arjun",
    "Grace",
    "Mateo",
    "Zara",
    "Felix",
    "Amara",
    "Noah",
    "Leila",
    "Erik",
    "Rosa",
    "Daniel",
    "Keiko",
    "Omar",
    "Julia",
    "Sipho",
    "Clara",
    "Hugo",
    "Anya",
    "Victor",
    "Maya",
    "Pavel",
    "Lucia",
    "Owen",
    "Ingrid",
    "Kofi",
)
SURNAMES = (
    "Patel",
    "Okafor",
    "Rossi",
    "Tanaka",
    "Novak",
    "Garcia",
    "Schmidt",
    "Mensah",
    "Larsen",
    "Costa",
    "Nguyen",
    "Fischer",
    "Haddad",
    "Moreau",
    "Kowalski",
    "Silva",
    "Brennan",
    "Ito",
    "Adeyemi",
    "Lindqvist",
    "Murphy",
)
COMPANIES = (
    "Hartley & Co",
    "Brightline",
    "Northwind Supplies",
    "Cedar Analytics",
    "Bluebird Studio",
    "Orbis Freight",
    "Maple Street Bakery",
    "Greenleaf Foods",
    "Atlas Print",
    "Lumen Labs",
    "Riverside Books",
    "Kestrel Tools",
    "Harbor Design",
    "Summit Outdoor",
    "Pine & Partners",
    "Copperfield Media",
)
PROJECTS = (
    "budget review",
    "quarterly report",
    "website relaunch",
    "supplier contract",
    "training plan",
    "product launch",
    "marketing brief",
    "audit preparation",
    "office move",
    "client workshop",
    "hiring plan",
    "sales forecast",
    "design review",
    "migration plan",
    "annual survey",
)
PLACES = (
    "the main conference room",
    "Room 4B",
    "the café on Elm Street",
    "the second-floor kitchen",
    "the Blue Room",
    "our Leeds office",
    "the library meeting room",
    "Studio 2",
    "the front lobby",
    "the rooftop terrace",
    "the Oak Room",
    "the canteen",
)
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday")
MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
PRODUCTS = (
    "desk lamp",
    "coffee grinder",
    "pair of hiking boots",
    "wool blanket",
    "bluetooth speaker",
    "office chair",
    "set of kitchen knives",
    "backpack",
    "standing desk",
    "kettle",
    "monitor stand",
    "rain jacket",
)
ITEMS_TO_SEND = (
    "the latest figures",
    "the signed contract",
    "the slides",
    "the updated budget",
    "the meeting notes",
    "the draft agenda",
    "the invoice",
    "the final design files",
    "the test results",
    "the guest list",
)
EVENTS = (
    ("dinner", "at your place"),
    ("birthday party", "at the Red Lion"),
    ("book launch", "at Riverside Books"),
    ("housewarming", "at the new flat"),
    ("summer barbecue", "in the garden"),
    ("farewell drinks", "at the Crown"),
    ("wedding", "at St Mary's"),
    ("team lunch", "at Luigi's"),
    ("gallery opening", "at the Harbor Gallery"),
)
REASONS = (
    "a supplier delay",
    "an unexpected staff shortage",
    "a problem with our courier",
    "a late change in the specs",
    "a system outage last week",
    "a backlog after the holidays",
    "a fault we found in final testing",
)


def _time(rng: random.Random) -> str:
    hour = rng.choice((8, 9, 10, 11, 12, 13, 14, 15, 16, 17))
    minute = rng.choice((0, 0, 0, 30, 15, 45))
    if rng.random() < 0.25:
        return f"{hour}:{minute:02d}"
    suffix = "am" if hour < 12 else "pm"
    shown = hour if hour <= 12 else hour - 12
    space = " " if rng.random() < 0.3 else ""
    return f"{shown}{suffix}" if minute == 0 else f"{shown}:{minute:02d}{space}{suffix}"


def _time_range(rng: random.Random) -> tuple[str, str]:
    """Two times of one day, the second later, written the same way."""
    first = rng.randint(7, 15)
    last = rng.randint(first + 1, 18)
    if rng.random() < 0.3:
        return f"{first}:00", f"{last}:00"
    return tuple(f"{h if h <= 12 else h - 12}{'am' if h < 12 else 'pm'}" for h in (first, last))  # type: ignore[return-value]


def _date(rng: random.Random) -> str:
    day, month = rng.randint(1, 28), rng.choice(MONTHS)
    return rng.choice((f"{month} {day}", f"{day} {month}"))


def _sum(rng: random.Random) -> str:
    amount = rng.choice((rng.randint(12, 99), rng.randint(100, 950), rng.randint(1000, 9000)))
    cents = rng.choice(("", "", f".{rng.randint(10, 99)}"))
    symbol = rng.choice(("€", "$", "£"))
    shown = f"{amount:,}" if amount >= 1000 else str(amount)
    return f"{symbol}{shown}{cents}"


def _code(rng: random.Random, letters: int = 0, digits: int = 5, sep: str = "") -> str:
    alphabet = "ABCDEFGHJKLMNPRSTUVWXYZ"
    head = "".join(rng.choice(alphabet) for _ in range(letters))
    tail = "".join(rng.choice("0123456789") for _ in range(digits))
    return f"{head}{sep}{tail}"


def _pick(rng: random.Random, options: tuple[str, ...] | list[str], **slots: str) -> str:
    return rng.choice(options).format(**slots)


@dataclass
class _Letter:
    """A message being written: who to, who from, and how its document is cut around the cursor."""

    to: str
    me: str
    greeting: str
    sign_off: str

    @classmethod
    def drawn(cls, rng: random.Random, formal: bool | None = None) -> _Letter:
        to, me = rng.sample(FIRST_NAMES, 2)
        formal = rng.random() < 0.3 if formal is None else formal
        if formal:
            greeting = _pick(
                rng, ("Dear {to},", "Dear {to} {surname},", "Hello {to},"), to=to, surname=rng.choice(SURNAMES)
            )
            sign_off = rng.choice(("Kind regards,", "Best regards,", "Yours sincerely,", "With thanks,"))
        else:
            greeting = _pick(rng, ("Hi {to},", "Hey {to},", "Hello {to},", "{to},", "Hi {to}!"), to=to)
            sign_off = rng.choice(("Best,", "Thanks,", "Cheers,", "All the best,", "Talk soon,", "Thanks again,"))
        return cls(to, me, greeting, sign_off)


def occurrences(fact: str, text: str) -> int:
    """How often a fact stands in a text as a whole (not "2pm" inside "12pm")."""
    return len(re.findall(rf"(?<![\w£$€]){re.escape(fact)}(?!\w)", text, re.IGNORECASE))


def shares_words(text: str, other: str, run: int = 8) -> bool:
    """Whether `text` has a run of `run` words word for word from `other` (what the benchmark calls copied)."""
    words = re.findall(r"[\w']+", text.lower())
    runs = {tuple(words[i : i + run]) for i in range(len(words) - run + 1)}
    theirs = re.findall(r"[\w']+", other.lower())
    return any(tuple(theirs[i : i + run]) in runs for i in range(len(theirs) - run + 1))


def _lower_first(sentence: str) -> str:
    first = sentence.split(" ", 1)[0]
    if first in ("I", "I'm", "I've", "I'll", "I'd") or first[:1].isdigit() or first in FIRST_NAMES:
        return sentence
    return sentence[:1].lower() + sentence[1:]


# Openings the writer may have begun the sentence at the cursor with; the target then goes on from them.
_CLAUSE_OPENERS = (
    "I wanted to let you know that",
    "Just a quick note to say that",
    "I'm writing to let you know that",
    "I wanted to say that",
    "Quick update:",
    "To answer your question,",
)


def _compose(
    rng: random.Random,
    kind: str,
    letter: _Letter,
    context: list[str],
    core: list[str],
    instruction: str,
    facts: tuple[str, ...],
    stance: str,
    *,
    closing: tuple[str, ...] = (),
    names: tuple[str, ...] = (),
) -> WritingCase:
    """A case from a letter's context sentences (written before the cursor), the sentences that belong at
    the cursor (core), and where the cursor stands: at the end, or before a closing paragraph."""
    before = letter.greeting + "\n\n" + " ".join(context)
    opener = rng.random() < 0.3 and not core[0].startswith(letter.to)
    body = list(core)
    if opener:
        before += "\n\n" + rng.choice(_CLAUSE_OPENERS)
        body[0] = _lower_first(body[0])
    if closing and rng.random() < 0.5:
        body.append(rng.choice(closing))
    where = rng.random()
    if where < 0.35:  # the cursor at the end of the document
        after = ""
    elif where < 0.7:  # the sign-off already written
        after = f"\n\n{letter.sign_off}\n{letter.me}"
    else:  # a closing paragraph already written after the cursor
        last = rng.choice(
            (
                "Have a good weekend!",
                "Let me know if anything changes.",
                "Thanks for your patience.",
                "Speak soon.",
                "Hope the rest of your week goes well.",
            )
        )
        after = f"\n\n{last}\n\n{letter.sign_off}\n{letter.me}"
    target = _joined(body, opener)
    if not opener:  # where the writer left the cursor: after a blank line, after a space, or at the full stop
        cursor = rng.random()
        if cursor < 0.4:
            before += "\n\n"
        elif cursor < 0.6:
            before += " "
        else:
            target = rng.choice(("\n\n", " ")) + target
    for fact in facts:
        assert occurrences(fact, target) == 1, (kind, fact, target)
    return WritingCase(kind, before, after, instruction, target, facts, stance, (letter.to, letter.me, *names))


def _joined(sentences: list[str], opener: bool) -> str:
    text = " ".join(sentences)
    return (" " + text) if opener else text


def _meeting_reply(rng: random.Random) -> WritingCase:
    letter = _Letter.drawn(rng)
    project, day = rng.choice(PROJECTS), rng.choice(WEEKDAYS)
    new_day = rng.choice([d for d in WEEKDAYS if d != day])
    time, item = _time(rng), rng.choice(ITEMS_TO_SEND)
    context = [
        _pick(
            rng,
            (
                "Thanks for the note about the {p} on {d}.",
                "Thanks for setting up the {p} meeting for {d}.",
                "I saw your invite for the {p} on {d}.",
                "Thanks for organising the {p} this {d}.",
            ),
            p=project,
            d=day,
        )
    ]
    stance = rng.choice(("decline", "decline", "accept"))
    if stance == "decline":
        sorry = _pick(
            rng,
            (
                "Unfortunately I can't make {d}.",
                "I'm afraid I can't make it on {d}.",
                "Sadly I won't be able to attend on {d}.",
                "I can't make {d}, I'm sorry to say.",
            ),
            d=day,
        )
        propose = _pick(
            rng,
            (
                "Could we meet on {n} at {t} instead?",
                "Would {n} at {t} work for you instead?",
                "How about {n} at {t}?",
                "I could do {n} at {t}, if that suits you.",
            ),
            n=new_day,
            t=time,
        )
        core = [sorry, propose]
        facts: tuple[str, ...] = (new_day, time)
        ask = rng.random() < 0.7
        if ask:
            core.append(
                _pick(
                    rng,
                    (
                        "Could you also send me {i}?",
                        "In the meantime, could you send over {i}?",
                        "It would help to have {i} before then.",
                    ),
                    i=item,
                )
            )
            facts += (item.removeprefix("the "),)
        instruction = _pick(
            rng,
            (
                "the rest of my reply: I can't make {d}, so propose {n} at {t} instead{a}.",
                "decline {d}, suggest {n} {t}{a}",
                "Say I can't come on {d} and propose {n} at {t}{a}.",
                "Write that {d} doesn't work for me and offer {n} at {t}{a}.",
                "reply: can't do {d}, {n} at {t} instead?{a}",
            ),
            d=day,
            n=new_day,
            t=time,
            a=(f", and ask for {item}" if ask else ""),
        )
    else:
        core = [
            _pick(
                rng,
                ("{d} works for me.", "I'll be there on {d}.", "Count me in for {d}.", "Yes, I can make {d}."),
                d=day,
            ),
            _pick(rng, ("See you at {t}.", "I'll be there at {t}.", "{t} is fine."), t=time),
        ]
        facts = (day, time)
        instruction = _pick(
            rng,
            (
                "confirm I'll come on {d} at {t}",
                "Accept: {d} at {t} is fine.",
                "the rest of my reply: yes to {d} at {t}.",
                "Say I'll attend on {d} at {t}.",
            ),
            d=day,
            t=time,
        )
        facts = (day, time) if day not in context[0] else (time,)
        if day in context[0]:
            core[0] = rng.choice(("That works for me.", "I'll be there.", "Count me in."))
    closing = ("Thanks for understanding.", "Sorry for the short notice.", "Looking forward to catching up.")
    return _compose(
        rng,
        "meeting-reply",
        letter,
        context,
        core,
        instruction,
        facts,
        stance,
        closing=closing if stance == "decline" else ("Thanks for organising.",),
    )


def _invitation_reply(rng: random.Random) -> WritingCase:
    letter = _Letter.drawn(rng, formal=False)
    (event, where), day = rng.choice(EVENTS), rng.choice((*WEEKDAYS, "Saturday", "Sunday"))
    context = [
        _pick(
            rng,
            (
                "Thank you so much for the invitation to your {e} {w}.",
                "Thanks for inviting me to the {e}!",
                "It was lovely to get your invitation to the {e}.",
            ),
            e=event,
            w=where,
        )
    ]
    stance = rng.choice(("accept", "decline"))
    bring = rng.choice(("a dessert", "a bottle of wine", "some flowers", "a salad", "my guitar"))
    if stance == "accept":
        core = [
            _pick(
                rng,
                (
                    "I'd love to come on {d}.",
                    "I'll definitely be there on {d}.",
                    "Count me in for {d}!",
                    "I'm delighted to accept, and I'll see you on {d}.",
                ),
                d=day,
            ),
            _pick(rng, ("I'll bring {b}.", "Let me bring {b}.", "I'm happy to bring {b}."), b=bring),
        ]
        instruction = _pick(
            rng,
            (
                "accept, I'll be there on {d} and bring {b}",
                "Say yes for {d} and offer to bring {b}.",
                "the rest: happy to come {d}, will bring {b}",
            ),
            d=day,
            b=bring,
        )
        facts: tuple[str, ...] = (day, bring)
    else:
        clash = rng.choice(("a family wedding", "a work trip", "my sister's graduation", "a long-planned trip"))
        core = [
            _pick(
                rng,
                (
                    "Sadly I can't come on {d}.",
                    "I'm so sorry, but I won't be able to make it on {d}.",
                    "Unfortunately I have to decline, as I'm away on {d}.",
                ),
                d=day,
            ),
            _pick(rng, ("I have {c} that day.", "It clashes with {c}.", "I'll be at {c}."), c=clash),
            rng.choice(("I hope it's a wonderful evening.", "Have a great time, and let's catch up soon.")),
        ]
        instruction = _pick(
            rng,
            (
                "decline politely, I'm at {c} on {d}",
                "Say I can't come on {d} because of {c}.",
                "the rest of my reply: sorry, can't make {d}, I have {c}",
            ),
            d=day,
            c=clash,
        )
        facts = (day, clash)
    return _compose(rng, "invitation-reply", letter, context, core, instruction, facts, stance)


def _delay_notice(rng: random.Random) -> WritingCase:
    letter = _Letter.drawn(rng, formal=True)
    thing = rng.choice(("your order", "the report", "the shipment", "the first draft", "the new brochure"))
    old, new, reason = _date(rng), _date(rng), rng.choice(REASONS)
    order = _code(rng, 0, 5)
    context = [
        _pick(
            rng,
            ("Thank you for your order {o}.", "I'm writing about order {o}.", "This is about {t} (reference {o})."),
            o=order,
            t=thing,
        )
    ]
    core = [
        _pick(
            rng,
            (
                "I'm sorry to tell you that {t} will be late.",
                "We apologise, but {t} is delayed.",
                "Unfortunately {t} won't be ready on {o}, and I'm very sorry for that.",
            ),
            t=thing,
            o=old,
        ),
        _pick(rng, ("This is due to {r}.", "The delay is caused by {r}.", "We ran into {r}."), r=reason),
        _pick(rng, ("The new date is {n}.", "It will now arrive on {n}.", "You can expect it by {n}."), n=new),
    ]
    old_in = old in core[0]
    instruction = _pick(
        rng,
        (
            "apologise for the delay ({r}), new date {n}",
            "Tell them it's late because of {r}; new date: {n}.",
            "the rest: say sorry, {r}, it will be ready {n}",
            "Apologise and give the new date, {n}. Reason: {r}.",
        ),
        r=reason,
        n=new,
    )
    if old_in:
        instruction += f" (it was due {old})"
    facts = (new, reason) + ((old,) if old_in else ())
    return _compose(
        rng,
        "delay-notice",
        letter,
        context,
        core,
        instruction,
        facts,
        "apologise",
        closing=("Thank you for your patience.", "Please accept our apologies."),
    )


def _payment_reminder(rng: random.Random) -> WritingCase:
    letter = _Letter.drawn(rng, formal=True)
    amount, due, invoice = _sum(rng), _date(rng), _code(rng, 3, 4, "-")
    company = rng.choice(COMPANIES)
    context = [
        _pick(
            rng,
            (
                "I hope you're well.",
                "Thank you again for working with {c}.",
                "I hope the project is going smoothly on your side.",
            ),
            c=company,
        )
    ]
    core = [
        _pick(
            rng,
            (
                "This is a friendly reminder that invoice {i} for {a} is due on {d}.",
                "Invoice {i} ({a}) is due on {d}.",
                "Just a reminder: {a} is still outstanding on invoice {i}, due {d}.",
            ),
            i=invoice,
            a=amount,
            d=due,
        ),
        rng.choice(
            (
                "You can pay by bank transfer using the details on the invoice.",
                "Please let me know if you need another copy.",
                "Payment by card or bank transfer is fine.",
            )
        ),
    ]
    instruction = _pick(
        rng,
        (
            "remind them: invoice {i}, {a}, due {d}",
            "A polite reminder: {a}, invoice {i}, due on {d}.",
            "the rest: payment reminder, {a} due {d} (invoice {i})",
        ),
        i=invoice,
        a=amount,
        d=due,
    )
    return _compose(
        rng,
        "payment-reminder",
        letter,
        context,
        core,
        instruction,
        (amount, due, invoice),
        "none",
        closing=("Thank you in advance.", "Many thanks."),
    )


def _thanks_and_invite(rng: random.Random) -> WritingCase:
    letter = _Letter.drawn(rng, formal=False)
    help_with = rng.choice(("the move", "my presentation", "the garden", "the launch", "fixing my bike"))
    day, time = rng.choice((*WEEKDAYS, "Saturday")), _time(rng)
    place = rng.choice(("our place", "Thai Garden", "Bella Vista", "the Crown"))
    context = [
        _pick(rng, ("It's been a busy week.", "Things have finally calmed down here.", "I hope you got home safely."))
    ]
    core = [
        _pick(
            rng,
            (
                "Thank you so much for your help with {h}.",
                "I really appreciated your help with {h}.",
                "I couldn't have managed {h} without you.",
            ),
            h=help_with,
        ),
        _pick(
            rng,
            (
                "Would you like to come to dinner at {p} on {d} at {t}?",
                "Let me take you to dinner at {p}, {d} at {t}?",
                "Are you free on {d}? Dinner at {p}, {t}, my treat.",
            ),
            p=place,
            d=day,
            t=time,
        ),
    ]
    instruction = _pick(
        rng,
        (
            "thank them for helping with {h}, and ask them out for dinner: {p}, {d} at {t}",
            "Thanks for {h}; dinner at {p}, {d} {t}?",
            "the rest: a thank-you for {h}, plus a dinner invite ({p}, {d}, {t})",
        ),
        h=help_with,
        p=place,
        d=day,
        t=time,
    )
    return _compose(rng, "thanks-invite", letter, context, core, instruction, (help_with, place, day, time), "none")


def _order_problem(rng: random.Random) -> WritingCase:
    letter = _Letter.drawn(rng, formal=True)
    product, order, code = rng.choice(PRODUCTS), _code(rng, 0, 6), _code(rng, 5, 2)
    percent = rng.choice(("10%", "15%", "20%", "25%"))
    context = [
        _pick(
            rng,
            (
                "Thank you for letting us know that your {p} arrived damaged.",
                "We're sorry to hear about the problem with your {p} (order {o}).",
                "Thanks for your message about order {o}.",
            ),
            p=product,
            o=order,
        )
    ]
    core = [
        _pick(
            rng, ("We apologise for the inconvenience.", "I'm very sorry about this.", "Please accept our apologies.")
        ),
        _pick(
            rng,
            (
                "A replacement is on its way and should arrive within three days.",
                "We've sent a replacement today, free of charge.",
                "We will ship a replacement at no cost.",
            ),
        ),
        _pick(
            rng,
            (
                "As a thank-you for your patience, here is a code for {pc} off your next order: {c}.",
                "Please use code {c} for {pc} off your next purchase.",
                "You can also use {c} for {pc} off next time.",
            ),
            c=code,
            pc=percent,
        ),
    ]
    instruction = _pick(
        rng,
        (
            "apologise, replacement shipped, give code {c} for {pc} off",
            "Say sorry, send a replacement and offer {pc} off with {c}.",
            "the rest: apology, replacement on its way, discount code {c} ({pc})",
        ),
        c=code,
        pc=percent,
    )
    return _compose(
        rng,
        "order-problem",
        letter,
        context,
        core,
        instruction,
        (code, percent),
        "apologise",
        closing=("Thank you for shopping with us.",),
    )


def _staff_announcement(rng: random.Random) -> WritingCase:
    letter = _Letter.drawn(rng, formal=False)
    letter.greeting = rng.choice(("Hi all,", "Hello everyone,", "Dear team,", "Hi team,"))
    what = rng.choice(
        (
            "a fire drill",
            "the quarterly all-hands",
            "a first-aid course",
            "the summer party",
            "a security training",
            "the office clean-up day",
            "a farewell for Marta",
        )
    )
    day, time, place = rng.choice(WEEKDAYS), _time(rng), rng.choice(PLACES)
    bring = rng.choice(("your laptop", "your badge", "comfortable shoes", "a mug", "questions for the Q&A"))
    context = [
        rng.choice(
            ("A quick announcement for everyone.", "Please put this in your diaries.", "One more thing for this week.")
        )
    ]
    core = [
        _pick(
            rng,
            (
                "We're holding {w} on {d} at {t} in {p}.",
                "{W} will take place on {d} at {t}, in {p}.",
                "Please join us for {w} in {p} on {d} at {t}.",
            ),
            w=what,
            W=what[:1].upper() + what[1:],
            d=day,
            t=time,
            p=place,
        ),
        _pick(rng, ("Please bring {b}.", "Don't forget to bring {b}.", "Remember {b}."), b=bring),
    ]
    instruction = _pick(
        rng,
        (
            "announce {w}: {d}, {t}, {p}; bring {b}",
            "Tell everyone: {w}, {d} at {t}, {p}. They should bring {b}.",
            "the rest: {w}, {d} {t}, {p}. bring {b}",
        ),
        w=what,
        d=day,
        t=time,
        p=place,
        b=bring,
    )
    return _compose(
        rng,
        "staff-announcement",
        letter,
        context,
        core,
        instruction,
        (day, time, place, bring),
        "none",
        closing=("Thanks, everyone.", "See you there."),
    )


def _job_offer_reply(rng: random.Random) -> WritingCase:
    letter = _Letter.drawn(rng, formal=True)
    role = rng.choice(("Data Analyst", "Product Designer", "Sales Manager", "Junior Developer", "Office Manager"))
    company, start = rng.choice(COMPANIES), _date(rng)
    context = [
        _pick(
            rng,
            ("Thank you for offering me the {r} position at {c}.", "Thank you for the offer of the {r} role."),
            r=role,
            c=company,
        )
    ]
    stance = rng.choice(("accept", "decline"))
    if stance == "accept":
        core = [
            rng.choice(("I'm delighted to accept.", "I'm very happy to accept the offer.", "I gladly accept.")),
            _pick(rng, ("I can start on {s}.", "My first day could be {s}.", "I'd be able to start on {s}."), s=start),
        ]
        instruction = _pick(rng, ("accept, I can start {s}", "Accept the offer and say I can start on {s}."), s=start)
        facts: tuple[str, ...] = (start,)
    else:
        other = rng.choice(("another offer", "a role closer to home", "an internal promotion"))
        core = [
            rng.choice(
                (
                    "After careful thought, I have decided to decline the offer.",
                    "I'm afraid I must decline.",
                    "Unfortunately, I have to turn the offer down.",
                )
            ),
            _pick(rng, ("I have accepted {o}.", "I've decided to take {o}."), o=other),
            rng.choice(("Thank you for your time and for the kind conversations.", "I hope our paths cross again.")),
        ]
        instruction = _pick(
            rng, ("decline the offer politely, I took {o}", "Turn it down: I've accepted {o}."), o=other
        )
        facts = (other,)
    return _compose(rng, "job-offer-reply", letter, context, core, instruction, facts, stance)


def _outage_notice(rng: random.Random) -> WritingCase:
    letter = _Letter.drawn(rng, formal=True)
    letter.greeting = rng.choice(("Dear customers,", "Hello everyone,", "Dear users,", "Hi all,"))
    service = rng.choice(("internet", "phone line", "booking system", "website", "payment portal", "customer hotline"))
    day = _date(rng)
    start, end = _time_range(rng)
    context = [
        rng.choice(
            (
                "We have some planned maintenance coming up.",
                "Please note the following.",
                "An update from the facilities team.",
            )
        )
    ]
    core = [
        _pick(
            rng,
            (
                "The {s} will be off on {d} from {a} to {b}.",
                "On {d}, the {s} will be unavailable between {a} and {b}.",
                "There will be no {s} on {d}, {a} to {b}.",
            ),
            s=service,
            d=day,
            a=start,
            b=end,
        ),
        rng.choice(
            ("We're sorry for the inconvenience.", "Thank you for your understanding.", "Please plan around it.")
        ),
    ]
    instruction = _pick(
        rng,
        (
            "the {s} is off on {d}, {a} to {b}",
            "Tell everyone the {s} will be down on {d} from {a} until {b}.",
            "the rest: {s} outage {d}, {a}-{b}",
        ),
        s=service,
        d=day,
        a=start,
        b=end,
    )
    return _compose(rng, "outage-notice", letter, context, core, instruction, (service, day, start, end), "none")


def _order_confirmation(rng: random.Random) -> WritingCase:
    letter = _Letter.drawn(rng, formal=True)
    order, total, arrive, product = _code(rng, 0, 6), _sum(rng), _date(rng), rng.choice(PRODUCTS)
    context = [_pick(rng, ("Thank you for shopping at {c}.", "Thanks for your order!"), c=rng.choice(COMPANIES))]
    core = [
        _pick(rng, ("Your order {o} for a {p} is confirmed.", "We've received order {o} ({p})."), o=order, p=product),
        _pick(rng, ("The total is {t}.", "You paid {t} in total.", "Your total comes to {t}."), t=total),
        _pick(rng, ("It should arrive by {a}.", "Expected delivery: {a}.", "We'll deliver it on {a}."), a=arrive),
    ]
    instruction = _pick(
        rng,
        ("confirm order {o} ({p}), total {t}, arrives {a}", "Confirm the order: {o}, a {p}, {t}, delivery {a}."),
        o=order,
        p=product,
        t=total,
        a=arrive,
    )
    return _compose(rng, "order-confirmation", letter, context, core, instruction, (order, total, arrive), "none")


def _request_documents(rng: random.Random) -> WritingCase:
    letter = _Letter.drawn(rng)
    item, due, project = rng.choice(ITEMS_TO_SEND), _date(rng), rng.choice(PROJECTS)
    context = [
        _pick(
            rng,
            ("We're getting ready for the {p}.", "The {p} is coming together.", "Thanks for the update on the {p}."),
            p=project,
        )
    ]
    core = [
        _pick(
            rng,
            ("Could you send me {i} by {d}?", "Please send {i} by {d}.", "I'll need {i} no later than {d}."),
            i=item,
            d=due,
        ),
        rng.choice(
            (
                "That gives me time to review them.",
                "Let me know if that's a problem.",
                "Thanks for your help with this.",
            )
        ),
    ]
    instruction = _pick(
        rng,
        ("ask for {i} by {d}", "Ask for {i}; the deadline is {d}.", "the rest: need {i}, deadline {d}"),
        i=item,
        d=due,
    )
    return _compose(
        rng, "document-request", letter, context, core, instruction, (item.removeprefix("the "), due), "none"
    )


MAKERS: dict[str, Callable[[random.Random], WritingCase]] = {
    "meeting-reply": _meeting_reply,
    "invitation-reply": _invitation_reply,
    "delay-notice": _delay_notice,
    "payment-reminder": _payment_reminder,
    "thanks-invite": _thanks_and_invite,
    "order-problem": _order_problem,
    "staff-announcement": _staff_announcement,
    "job-offer-reply": _job_offer_reply,
    "outage-notice": _outage_notice,
    "order-confirmation": _order_confirmation,
    "document-request": _request_documents,
}


def writing_cases(count: int, seed: int = 0, kinds: tuple[str, ...] = tuple(MAKERS)) -> list[WritingCase]:
    """`count` cases drawn in turn from `kinds`, each with its own generator state (a case is the same
    whatever `count` is, so a set can be extended)."""
    cases = []
    for index in range(count):
        kind = kinds[index % len(kinds)]
        rng = random.Random(f"{seed}:{index}:{kind}")
        cases.append(MAKERS[kind](rng))
    return cases
