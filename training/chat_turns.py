"""Short conversations that recall what the user said, for the writing adapter's mix (training/write.py).

The user tells something (their name, city, job, a pet's name, a birthday, a number, a favourite, a plan, a
friend's or colleague's name), the assistant acknowledges it, a turn or two may come between (another fact, or an open
instruction answered by a draft the shipped drafter learned from), then the user asks about it; the
assistant's last reply, the only part learned, says it back. All composed here from pools and phrasings, none
by a model. The probes (bench/chat_recall.py) use other phrasings and other values, so what they measure is
what the adapter carries over, not what it learned by heart: no conversation holds a probe's turn, its
names or its values (tests/test_training/test_chat_turns.py reads the probe's lists).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from training.data import Pair

Message = dict[str, str]


@dataclass(frozen=True)
class Form:
    """One way of telling a fact, with the questions that ask it back and the replies that recall it.
    `{v}` is the value; `{x}` the kind's second slot (an animal, a relative, a thing numbered), if any."""

    tell: str
    questions: tuple[str, ...]
    answers: tuple[str, ...]
    acks: tuple[str, ...] = ()  # acknowledgements that say the value back (besides the plain ones)


@dataclass(frozen=True)
class FactKind:
    name: str
    values: tuple[str, ...]
    forms: tuple[Form, ...]
    seconds: tuple[str, ...] = ("",)  # the second slot's values


@dataclass(frozen=True)
class ChatTurns:
    kind: str
    value: str  # what the last reply must say
    messages: tuple[Message, ...]  # the conversation, its last message the assistant's reply

    @property
    def prompt(self) -> list[Message]:
        return list(self.messages[:-1])

    @property
    def reply(self) -> str:
        return self.messages[-1]["content"]


PLAIN_ACKS = (
    "Thanks for telling me.",
    "Got it.",
    "Noted!",
    "Good to know.",
    "Thank you, I'll keep that in mind.",
    "Understood. How can I help you today?",
    "Okay, I'll remember that.",
    "Thanks! What would you like to write today?",
)

NAMES = (
    "Maya", "Jonas", "Aisha", "Diego", "Noor", "Felix", "Hana", "Omar", "Clara", "Ivan", "Zara", "Leo", "Mei",
    "Sofia", "Rahul", "Elena", "Samir", "Greta", "Kofi", "Yuki", "Marco", "Ines", "Tariq", "Nadia", "Pablo",
    "Freya", "Oscar", "Amara", "Hugo", "Lena", "Arjun", "Chloe", "Mateo", "Ingrid", "Emeka", "Rosa", "Theo",
    "Anika", "Dmitri", "Julia", "Sven", "Leila", "Carlos", "Aiko", "Fatima", "Niall", "Beatriz", "Joseph",
)  # fmt: skip
CITIES = (
    "Porto", "Leeds", "Nairobi", "Kraków", "Montreal", "Seville", "Dublin", "Hanoi", "Bristol", "Accra", "Quito",
    "Bergen", "Glasgow", "Perth", "Bologna", "Denver", "Lagos", "Ghent", "Valencia", "Kyoto", "Halifax",
    "Tampere", "Cusco", "Durban", "Graz", "Brisbane", "Utrecht", "Córdoba",
)  # fmt: skip
JOBS = (
    "a nurse", "a carpenter", "a teacher", "a pilot", "an accountant", "a chef", "a librarian", "an electrician",
    "an architect", "a dentist", "a baker", "a translator", "a plumber", "a pharmacist", "a journalist",
    "a gardener", "a software developer", "a vet", "a lawyer", "a photographer", "a bus driver", "a tailor",
)  # fmt: skip
PET_NAMES = (
    "Biscuit", "Luna", "Rex", "Miso", "Pip", "Mango", "Shadow", "Olive", "Bruno", "Nala", "Toffee", "Ziggy",
    "Pumpkin", "Maple", "Rocky", "Coco", "Ginger", "Bean", "Milo", "Hazel", "Noodle", "Sunny", "Bailey", "Frodo",
)  # fmt: skip
ANIMALS = ("dog", "cat", "rabbit", "parrot", "hamster", "tortoise", "horse", "goldfish")
DATES = (
    "March 3", "July 14", "the 2nd of May", "October 21", "the 9th of January", "December 30", "April 17",
    "the 25th of August", "June 6", "September 12", "February 28", "the 11th of November",
)  # fmt: skip
NUMBERS = ("14", "27", "305", "8", "42", "116", "63", "9", "1207", "58", "31", "740")
NUMBERED = ("flat", "locker", "seat", "room", "table", "lucky")
COLOURS = ("green", "dark blue", "yellow", "purple", "orange", "red", "teal", "grey")
FOODS = ("lasagne", "sushi", "curry", "pancakes", "tacos", "risotto", "dumplings", "paella", "falafel", "ramen")
INSTRUMENTS = ("the cello", "the drums", "the violin", "the guitar", "the piano", "the flute", "the trumpet")
RELATIVES = ("best friend", "cousin", "neighbour", "manager", "flatmate", "colleague", "partner")
PLACES = ("Madrid", "the coast", "the lake", "Berlin", "the mountains", "Edinburgh", "Lisbon", "Oslo")
DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")

KINDS = (
    FactKind(
        "name",
        NAMES,
        (
            Form(
                "I'm {v}.",
                ("Do you remember my name?", "Who am I?", "Can you tell me my name?"),
                ("Your name is {v}.", "You're {v}.", "You told me your name is {v}."),
                ("Hello, {v}! How can I help you today?", "Hi {v}, good to meet you.", "Welcome, {v}."),
            ),
            Form(
                "Hi, I'm {v}.",
                ("What did I tell you my name was?", "Do you know who I am?", "And my name?"),
                ("You told me you're {v}.", "You're {v}.", "Your name is {v}."),
                ("Hello {v}! What would you like to write today?", "Pleased to meet you, {v}."),
            ),
            Form(
                "Call me {v}.",
                ("What should you call me?", "What did I ask you to call me?", "Remind me what I'm called."),
                ("I should call you {v}.", "You asked me to call you {v}.", "You're {v}."),
                ("Sure, {v}.", "All right, {v}. What can I do for you?"),
            ),
            Form(
                "Hello! {v} here.",
                ("Do you remember my name?", "Who is talking to you?", "Can you say my name?"),
                ("You're {v}.", "Your name is {v}.", "Of course, you're {v}."),
                ("Hello, {v}!", "Hi {v}! How can I help?"),
            ),
        ),
    ),
    FactKind(
        "city",
        CITIES,
        (
            Form(
                "I live in {v}.",
                ("Where do I live?", "Do you remember where I live?", "Which city do I live in?"),
                ("You live in {v}.", "You told me you live in {v}.", "In {v}."),
                ("{v} sounds lovely.", "Got it, you live in {v}."),
            ),
            Form(
                "I'm from {v}.",
                ("Where am I from?", "Do you remember where I come from?", "Which city am I from?"),
                ("You're from {v}.", "You told me you come from {v}.", "{v}."),
                ("{v}, nice!", "Thanks! I've heard good things about {v}."),
            ),
            Form(
                "I moved to {v} last year.",
                ("Where did I move to?", "Which city did I move to last year?", "Where do I live now?"),
                ("You moved to {v} last year.", "To {v}.", "You live in {v} now."),
                ("How are you finding {v}?", "A new start in {v}, how exciting."),
            ),
        ),
    ),
    FactKind(
        "job",
        JOBS,
        (
            Form(
                "I work as {v}.",
                ("What do I work as?", "What's my job?", "Do you remember what I do?"),
                ("You work as {v}.", "You're {v}.", "You told me you work as {v}."),
                ("Working as {v} sounds interesting.",),
            ),
            Form(
                "I'm {v} by trade.",
                ("What is my trade?", "What do I do for work?", "Remind me what my job is."),
                ("You're {v} by trade.", "You're {v}.", "You work as {v}."),
                ("Being {v} must keep you busy.",),
            ),
        ),
    ),
    FactKind(
        "pet",
        PET_NAMES,
        (
            Form(
                "I have a {x} called {v}.",
                ("What is my {x} called?", "What's my {x}'s name?", "Do you remember my {x}'s name?"),
                ("Your {x} is called {v}.", "Your {x}'s name is {v}.", "{v}."),
                ("{v} is a lovely name for a {x}.", "Aw, {v}! How old is your {x}?"),
            ),
            Form(
                "My {x}'s name is {v}.",
                ("What did I say my {x} is called?", "Remind me of my {x}'s name.", "What's my {x} called?"),
                ("Your {x} is {v}.", "You said your {x} is called {v}.", "Your {x}'s name is {v}."),
                ("{v} is a great name.", "Say hello to {v} for me."),
            ),
            Form(
                "Our {x} is named {v}.",
                ("What is our {x} named?", "Do you remember the name of our {x}?", "What's our {x} called?"),
                ("Your {x} is named {v}.", "Your {x} is called {v}.", "{v}."),
                ("What a sweet name, {v}.",),
            ),
        ),
        seconds=ANIMALS,
    ),
    FactKind(
        "birthday",
        DATES,
        (
            Form(
                "My birthday is on {v}.",
                ("When is my birthday?", "Do you remember my birthday?", "What date is my birthday?"),
                ("Your birthday is on {v}.", "On {v}.", "You told me it's on {v}."),
                ("I'll remember {v}.",),
            ),
            Form(
                "I was born on {v}.",
                ("When was I born?", "What's my date of birth?", "On what day was I born?"),
                ("You were born on {v}.", "On {v}.", "You told me you were born on {v}."),
                (),
            ),
        ),
    ),
    FactKind(
        "number",
        NUMBERS,
        (
            Form(
                "My {x} number is {v}.",
                ("What is my {x} number?", "Do you remember my {x} number?", "Which {x} number did I give you?"),
                ("Your {x} number is {v}.", "It's {v}.", "You told me your {x} number is {v}."),
                ("Number {v}, got it.",),
            ),
            Form(
                "Please remember that my {x} number is {v}.",
                ("What's my {x} number?", "Can you remind me of my {x} number?", "What number was my {x}?"),
                ("Your {x} number is {v}.", "It's {v}.", "{v}."),
                ("I'll remember: {v}.",),
            ),
        ),
        seconds=NUMBERED,
    ),
    FactKind(
        "colour",
        COLOURS,
        (
            Form(
                "My favourite colour is {v}.",
                ("What's my favourite colour?", "Which colour do I like best?", "Do you remember my favourite colour?"),
                ("Your favourite colour is {v}.", "You like {v} best.", "{v}."),
                ("{v} is a nice choice.",),
            ),
        ),
    ),
    FactKind(
        "food",
        FOODS,
        (
            Form(
                "I love {v} more than any other food.",
                ("What's my favourite food?", "Which food do I love most?", "What did I say I like to eat?"),
                ("Your favourite food is {v}.", "You love {v}.", "{v}, more than any other food."),
                ("{v} is delicious.", "Good taste! {v} is hard to beat."),
            ),
            Form(
                "My favourite dish is {v}.",
                ("What's my favourite dish?", "Do you remember my favourite dish?", "Which dish do I like best?"),
                ("Your favourite dish is {v}.", "It's {v}.", "You said {v}."),
                (),
            ),
        ),
    ),
    FactKind(
        "instrument",
        INSTRUMENTS,
        (
            Form(
                "I play {v} in my free time.",
                ("Which instrument do I play?", "What do I play in my free time?", "What instrument did I mention?"),
                ("You play {v}.", "You play {v} in your free time.", "{v}."),
                ("Playing {v} is a wonderful hobby.",),
            ),
        ),
    ),
    FactKind(
        "person",
        NAMES,
        (
            Form(
                "My {x} is called {v}.",
                ("What's my {x}'s name?", "What is my {x} called?", "Do you remember my {x}'s name?"),
                ("Your {x} is called {v}.", "Your {x}'s name is {v}.", "{v}."),
                ("{v} is a lovely name.",),
            ),
            Form(
                "My {x}'s name is {v}.",
                ("What did I say my {x} is called?", "Who is my {x}?", "Can you remind me of my {x}'s name?"),
                ("Your {x} is {v}.", "Your {x}'s name is {v}.", "You told me your {x} is called {v}."),
                (),
            ),
        ),
        seconds=RELATIVES,
    ),
    FactKind(
        "plan",
        PLACES,
        (
            Form(
                "I'm going to {v} on {x}.",
                ("Where am I going on {x}?", "Where did I say I'm going on {x}?", "What are my plans for {x}?"),
                ("You're going to {v} on {x}.", "To {v}.", "You're going to {v}."),
                ("Have a good time in {v}!", "Enjoy your trip on {x}."),
            ),
            Form(
                "On {x} I'm travelling to {v}.",
                ("Where am I travelling on {x}?", "Where am I off to on {x}?", "Remind me of my plans for {x}."),
                ("You're travelling to {v} on {x}.", "To {v}.", "On {x} you're travelling to {v}."),
                ("Safe travels!",),
            ),
        ),
        seconds=DAYS,
    ),
)

# How many turns come between telling and asking, and how often.
BETWEEN_WEIGHTS = (0.45, 0.4, 0.15)
SHORT_DRAFT = 600  # characters: open drafts longer than this are not used as a turn between


def chat_turns(
    count: int, seed: int = 0, between: Sequence[Pair] = (), held_out: Callable[[str], bool] = lambda _text: False
) -> list[ChatTurns]:
    """`count` conversations; `between`: open pairs a turn between may be taken from (less those with a long
    draft, and those whose instruction or draft is `held_out`). The first n are the same whatever the count."""
    usable = [
        pair
        for pair in between
        if len(pair.draft) <= SHORT_DRAFT and not held_out(pair.instruction) and not held_out(pair.draft)
    ]
    return [_conversation(random.Random(seed * 1_000_003 + i), usable) for i in range(count)]


def _conversation(rng: random.Random, between: list[Pair]) -> ChatTurns:
    kind = rng.choice(KINDS)
    value, second = rng.choice(kind.values), rng.choice(kind.seconds)
    form = rng.choice(kind.forms)
    messages = [*_told(rng, kind, form, value, second)]
    turns = rng.choices(range(len(BETWEEN_WEIGHTS)), weights=BETWEEN_WEIGHTS)[0]
    for _ in range(turns):
        if between and rng.random() < 0.6:
            pair = rng.choice(between)
            messages += [_user(pair.instruction), _assistant(pair.draft)]
        else:
            other = rng.choice([k for k in KINDS if k.name != kind.name])
            other_value = rng.choice([v for v in other.values if v != value])
            messages += _told(rng, other, rng.choice(other.forms), other_value, rng.choice(other.seconds))
    question = _fill(rng.choice(form.questions), value, second)
    answer = _fill(rng.choice(form.answers), value, second)
    messages += [_user(question), _assistant(answer)]
    return ChatTurns(kind.name, value, tuple(messages))


def _told(rng: random.Random, kind: FactKind, form: Form, value: str, second: str) -> list[Message]:
    ack = rng.choice(PLAIN_ACKS + form.acks) if form.acks and rng.random() < 0.6 else rng.choice(PLAIN_ACKS)
    return [_user(_fill(form.tell, value, second)), _assistant(_fill(ack, value, second))]


def _fill(template: str, value: str, second: str) -> str:
    text = template.replace("{v}", value).replace("{x}", second)
    return text[0].upper() + text[1:]


def _user(text: str) -> Message:
    return {"role": "user", "content": text}


def _assistant(text: str) -> Message:
    return {"role": "assistant", "content": text}
