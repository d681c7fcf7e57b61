"""Open-ended writing instructions: many kinds of text about open topics, with kinds and topics held out.

The templated set (prompts.py) varies the slots of one kind of everyday message, and a model trained on
it learns those templates rather than how to follow an instruction. Here every kind of writing has its
own form (a blog post, a story, an outline, a reply to a quoted email, an edit of a given paragraph...)
and draws its subject from open pools. Whole kinds and a share of every pool are held out: instructions
built only from held-out kinds and held-out subjects never occur in training, and they are what the
embedded model is measured on (bench/embedded_quality.py --set unseen).
"""

from __future__ import annotations

import hashlib
import random
import string
from dataclasses import dataclass
from typing import Any

# Subject pools by slot. A kind's template names the slots it takes.
POOLS: dict[str, tuple[str, ...]] = {
    "subject": (
        "the ocean at night",
        "learning to play the piano",
        "a rainy afternoon in the city",
        "the history of the bicycle",
        "growing tomatoes on a balcony",
        "a lost dog finding its way home",
        "the first day at a new school",
        "living without a car",
        "the northern lights",
        "a grandmother's recipe book",
        "night trains",
        "urban beekeeping",
        "the smell of fresh bread",
        "moving to a new country",
        "a power cut during a storm",
        "the life of a lighthouse keeper",
        "old maps",
        "a year without social media",
        "street food",
        "the quiet of early morning",
        "public libraries",
        "a forgotten photograph",
        "running a first marathon",
        "volcanoes",
        "learning a new language as an adult",
        "a village festival",
        "the sound of rain on a tin roof",
        "honeybees",
        "the last day of summer",
        "second-hand books",
        "a broken umbrella",
        "working from home",
        "the moon landing",
        "a tree that has stood for five hundred years",
        "friendship between neighbours",
        "a snowed-in weekend",
        "the invention of the telephone",
        "autumn leaves",
        "a child's first bicycle ride",
        "coral reefs",
        "a small bakery",
        "the joy of cooking for friends",
        "an old radio",
        "deserts at night",
        "keeping a journal",
        "a market town",
        "whales",
        "the first cup of coffee",
        "a train journey through the mountains",
        "the sea in winter",
        "a garden after rain",
        "paper airplanes",
        "jazz music",
        "a chess tournament",
        "the first snowfall",
        "recycling at home",
        "a famous bridge",
        "owls",
        "the river that runs through a town",
        "a long walk in the woods",
        "board games",
        "the lost art of letter writing",
    ),
    "place": (
        "Hawaii",
        "Kyoto",
        "the Scottish Highlands",
        "Lisbon",
        "a small fishing village",
        "Iceland",
        "the Sahara",
        "Vancouver",
        "the Amalfi Coast",
        "Patagonia",
        "Istanbul",
        "a national park",
        "New Orleans",
        "the Alps",
        "Marrakesh",
        "Cape Town",
        "the Norwegian fjords",
        "Buenos Aires",
        "a Greek island",
        "Prague",
        "the Rocky Mountains",
        "Vietnam",
        "Edinburgh",
        "the Great Barrier Reef",
        "Mexico City",
        "Tasmania",
        "Seoul",
        "a mountain cabin",
    ),
    "item": (
        "a reusable water bottle",
        "noise-cancelling headphones",
        "a handmade wooden chair",
        "a solar-powered lamp",
        "a hiking backpack",
        "a cast-iron pan",
        "a smart watch",
        "a wool scarf",
        "an electric bicycle",
        "a board game for families",
        "a desk lamp",
        "a pair of running shoes",
        "a travel mug",
        "a small tent",
        "a fountain pen",
        "a kitchen scale",
        "a rain jacket",
        "a houseplant that needs little light",
        "a bluetooth speaker",
        "a picnic blanket",
    ),
    "task": (
        "making bread at home",
        "preparing for a job interview",
        "planting a vegetable garden",
        "saving money on groceries",
        "learning to swim",
        "packing for a long trip",
        "keeping a tidy desk",
        "training a puppy",
        "writing a good resume",
        "starting to run",
        "cooking rice",
        "studying for an exam",
        "moving house",
        "painting a room",
        "sleeping better",
        "making a budget",
        "giving a short presentation",
        "repairing a flat tyre",
        "caring for a houseplant",
        "making new friends in a new city",
        "brewing tea",
        "organising a birthday party",
    ),
    "concept": (
        "photosynthesis",
        "gravity",
        "how vaccines work",
        "compound interest",
        "why the sky is blue",
        "the water cycle",
        "how a rainbow forms",
        "electricity",
        "recycling",
        "how airplanes fly",
        "the seasons",
        "the internet",
        "inflation",
        "how bees make honey",
        "the phases of the moon",
        "earthquakes",
        "how the heart works",
        "tides",
        "democracy",
        "how plants drink water",
    ),
    "event": (
        "a new library opening",
        "a city marathon",
        "a heatwave",
        "a local election",
        "a school science fair",
        "a flood in a small town",
        "a music festival",
        "the opening of a new bridge",
        "a charity bake sale",
        "a solar eclipse",
        "a record-breaking snowfall",
        "a farmers' market returning",
        "a new bus line",
        "a museum reopening",
        "a football final",
        "a tech conference",
    ),
    "setting": (
        "a bustling marketplace",
        "an abandoned lighthouse",
        "a crowded train station",
        "a quiet village at dawn",
        "a ship in a storm",
        "a hospital at midnight",
        "a busy restaurant kitchen",
        "a mountain hut in winter",
        "a school playground",
        "an empty theatre",
        "a night bus",
        "a flower market",
        "a small island harbour",
        "a desert road",
        "a rooftop garden",
        "a library after closing time",
    ),
    "work": (
        "the quarterly report",
        "my first presentation",
        "the new project plan",
        "the customer survey results",
        "my draft proposal",
        "the marketing plan",
        "the monthly budget",
        "my article for the newsletter",
        "the training materials",
        "the website redesign",
    ),
    "style": ("more formal", "shorter", "friendlier", "clearer", "more persuasive", "simpler for a child"),
}

# Kinds the training data has; each template names its slots. {email} and {paragraph} are quoted texts.
TRAIN_KINDS: dict[str, str] = {
    "blog": "Write a blog post about {subject}.",
    "story": "Write a short story about {subject}.",
    "describe": "Describe {subject} in a few sentences.",
    "outline": "Write an outline for an article about {subject}.",
    "summary": "Write a short summary of what people should know about {concept}.",
    "product": "Write a product description for {item}.",
    "news": "Write a short news report about {event}.",
    "diary": "Write a diary entry about {subject}.",
    "review": "Write a review of {item}.",
    "steps": "Write step-by-step instructions for {task}.",
    "social": "Write a social media post about {event}.",
    "explain": "Explain {concept} to a ten-year-old.",
    "friend": "Write a letter to a friend about {subject}.",
    "tips": "Give five tips for {task}.",
    "essay": "Write the opening paragraph of an essay about {subject}.",
    "guide": "Write a short guide for visitors to {place}.",
    "poem": "Write a short poem about {subject}.",
    "reply": "Write a reply to this email:\n\n{email}",
    "rewrite": "Rewrite this paragraph to make it {style}:\n\n{paragraph}",
}
# More kinds of writing for training ("forms", a set of its own so that the open set's lists stay as they
# were written): the drafter learns from 19 kinds and is measured on 10 others, so the number of forms it
# has seen bounds how well it drafts a kind it has not. None is a held-out kind under another name.
FORM_KINDS: dict[str, str] = {
    "editor": "Write a letter to the editor of a local newspaper about {event}.",
    "invitation": "Write an invitation asking friends to come to {event}.",
    "announce": "Write a community newsletter announcement about {event}.",
    "headlines": "Write three headlines and a short opening paragraph for a news story about {event}.",
    "recommend": "Write a short recommendation of {item} for a friend.",
    "compare": "Compare {item} with a cheaper alternative.",
    "complaint": "Write a polite complaint about {item} that broke after a week.",
    "care": "Write care instructions for {item}.",
    "checklist": "Make a checklist for {task}.",
    "mistakes": "Describe the most common mistakes people make when {task}.",
    "reflection": "Write a short reflection on what {task} taught you.",
    "proscons": "List the pros and cons of {task}.",
    "define": "Define {concept} in two sentences, then give an example.",
    "quiz": "Write a five-question quiz about {concept}.",
    "dialogue": "Write a short dialogue between two friends about {subject}.",
    "fable": "Write a short fable about {subject}.",
    "bedtime": "Write a bedtime story for a child about {subject}.",
    "haiku": "Write three haiku about {subject}.",
    "future": "Write a letter to your future self about {subject}.",
    "character": "Describe a character who loves {subject}.",
    "caption": "Write a caption for a photograph of {subject}.",
    "history": "Write a short history of {place}.",
    "weather": "Describe the weather in {place} through the year.",
    "mood": "Describe the mood of {setting} in one paragraph.",
}
# Kinds that never occur in training: the unseen-kind measure.
HELD_OUT_KINDS: dict[str, str] = {
    "travel": "Write a travel blog post about a trip to {place}.",
    "feedback": "Write an email to your supervisor asking for feedback on {work}.",
    "scene": "Write a scene set in {setting}.",
    "persuade": "Write a persuasive paragraph about why {task} is worth learning.",
    "faq": "Write a short FAQ about {concept}.",
    "speech": "Write a short speech for {event}.",
    "ad": "Write an advertisement for {item}.",
    "memory": "Write about a childhood memory of {subject}.",
    "postcard": "Write a postcard home from {place}.",
    "lesson": "Write a lesson plan for teaching {concept}.",
}
HELD_OUT_SHARE = 0.25  # of every pool
# Added to most training instructions that quote nothing, so that the data also asks for a length, a tone
# or a reader (and a small pool of subjects yields many different instructions).
MODIFIERS = (
    " Keep it under 100 words.",
    " Use a friendly tone.",
    " Write it for beginners.",
    " Make it three short paragraphs.",
    " Use a formal tone.",
    " Make it cheerful.",
    " Keep it to five sentences.",
    " Write it for a young reader.",
    " Make it vivid and specific.",
)
QUOTING = frozenset({"email", "paragraph"})
OPEN_FIRST_ID = 100_000  # after the templated set's ids
FORMS_FIRST_ID = 400_000  # after the document and rewrite sets' (training/document_prompts.py)


def held_out_value(value: str) -> bool:
    """A stable split of the pool values (and quoted texts) by their text."""
    return hashlib.sha256(value.encode()).digest()[0] < HELD_OUT_SHARE * 256


@dataclass(frozen=True)
class OpenInstruction:
    id: int
    kind: str
    slots: tuple[tuple[str, str], ...]  # slot name -> value
    text: str  # the instruction learned
    # What the teacher is asked instead, where a layout it reads better gets a draft worth learning.
    asked_teacher: str = ""

    @property
    def teacher_message(self) -> str:
        return self.asked_teacher or self.text

    @property
    def topic_words(self) -> tuple[str, ...]:
        """The content words of its subjects (quoted texts and styles excluded): a draft on topic names one."""
        words: list[str] = []
        for name, value in self.slots:
            if name in QUOTING or name == "style":
                continue
            words += [w.strip(".,'").lower() for w in value.split() if len(w.strip(".,'")) >= 4]
        return tuple(w for w in words if w not in _COMMON)

    def record(self) -> dict[str, Any]:
        record = {"id": self.id, "kind": self.kind, "slots": dict(self.slots), "text": self.text}
        return {**record, "teacher_message": self.asked_teacher} if self.asked_teacher else record


def on_topic(text: str, topic_words: tuple[str, ...]) -> bool:
    """Whether the draft names a word of the subject (its first five letters: "markets" counts for "marketplace"
    only if they share them, so plurals and simple endings count)."""
    lowered = text.lower()
    return any(word[:5] in lowered for word in topic_words)


# Words too common to show that a draft is about its subject.
_COMMON = frozenset(
    {"what", "with", "that", "this", "from", "your", "about", "their", "without", "during", "after", "first", "between"}
    | {"small", "lost", "forms", "good", "long", "little", "early", "local", "home", "night", "short", "five"}
    | {"hundred", "years", "people", "know", "there", "which", "works", "make", "making", "learning", "writing"}
)


def open_instructions(
    count: int,
    *,
    quoted: list[str],
    seed: int = 0,
    held_out: bool = False,
    first_id: int = OPEN_FIRST_ID,
    kinds: dict[str, str] | None = None,
) -> list[OpenInstruction]:
    """`count` distinct instructions: training kinds (TRAIN_KINDS, or `kinds`) with training values, or
    (held_out) held-out kinds with held-out values only. `quoted` supplies the emails and paragraphs the
    reply and rewrite kinds quote (split the same way)."""
    kinds = HELD_OUT_KINDS if held_out else kinds or TRAIN_KINDS
    pools = {name: [v for v in values if held_out_value(v) == held_out] for name, values in POOLS.items()}
    pools["email"] = pools["paragraph"] = [q for q in quoted if held_out_value(q) == held_out]
    rng = random.Random(seed)
    made: list[OpenInstruction] = []
    seen: set[str] = set()
    names = sorted(kinds)
    attempts = 0
    while len(made) < count and attempts < count * 50:
        attempts += 1
        # Kinds in turn while that finds new instructions, then at random (a kind may run out).
        kind = names[len(made) % len(names)] if attempts <= count else rng.choice(names)
        template = kinds[kind]
        slots = tuple((name, rng.choice(pools[name])) for name in _slot_names(template) if pools[name])
        if len(slots) != len(_slot_names(template)):
            continue
        text = template.format(**dict(slots))
        if not held_out and not QUOTING & {name for name, _ in slots} and rng.random() < 0.7:
            text += rng.choice(MODIFIERS)
        if text in seen:
            continue
        seen.add(text)
        made.append(OpenInstruction(first_id + len(made), kind, slots, text))
    return made


def _slot_names(template: str) -> list[str]:
    return [name for _, name, _, _ in string.Formatter().parse(template) if name]
