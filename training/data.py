"""Instruction -> draft pairs as training sequences.

<|user|> instruction <|assistant|> draft, then end-of-text padding (learned too: it is how the model
says where the draft ends). Drafts are cleaned first: a greedy teacher sometimes loops, and a loop
taught to a small parallel decoder comes back as repetition; a draft cut off by the teacher's token
limit is trimmed to its last full sentence or line, so end-of-text is only taught where a draft may end.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer

from training.tokenizer import SpecialIds, special_ids

# A sentence or a line: text up to and including its closing punctuation (and a closing quote/bracket).
_SENTENCE = re.compile(r"[^.!?\n]+(?:[.!?]+[\"')\]]?|(?=\n)|$)")
_SENTENCE_END = re.compile(r"[.!?][\"')\]]?(?=\s|$)")
_MIN_REPEATED_WORDS = 4


@dataclass(frozen=True)
class Pair:
    id: int
    instruction: str
    draft: str


@dataclass(frozen=True)
class Encoded:
    tokens: list[int]
    # Where the answer starts: everything from here on (draft and EOS padding) is learned.
    answer_start: int


def without_loops(draft: str) -> str:
    """The draft up to the first sentence (of at least four words) that it has already said."""
    seen: set[str] = set()
    for match in _SENTENCE.finditer(draft):
        sentence = " ".join(match.group().lower().split())
        if len(sentence.split()) < _MIN_REPEATED_WORDS:
            continue
        if sentence in seen:
            return draft[: match.start()].rstrip()
        seen.add(sentence)
    return draft


def to_last_sentence(draft: str) -> str:
    """A draft cut off mid-sentence, trimmed to its last complete sentence or line (unchanged if it has none)."""
    ends = [match.end() for match in _SENTENCE_END.finditer(draft)]
    cut = max([*ends, draft.rfind("\n")])
    return draft[:cut] if cut > 0 else draft


def clean_draft(draft: str, finished: bool) -> str:
    looped = without_loops(draft)
    if looped != draft:
        return looped  # cut at a sentence boundary already
    return draft.strip() if finished else to_last_sentence(draft).strip()


# A rewrite that talks about itself rather than being the passage ("The revised version is more polite").
_COMMENTARY = re.compile(r"\b(original|revised|rewritten) (passage|version|text)\b|\bhere is\b", re.IGNORECASE)
_NUMBER = re.compile(r"\d[\d,.:/]*\d|\d")


def faithful_rewrite(selection: str, rewrite: str) -> bool:
    """A teacher's rewrite worth learning from: it keeps every number of the selection, and is the passage
    itself, not a comment on it."""
    return set(_NUMBER.findall(selection)) <= set(_NUMBER.findall(rewrite)) and not _COMMENTARY.search(rewrite)


# The headings of a draft-into-a-document request (app/domain/context.py's document_instruction), which a
# teacher that echoes its prompt writes back.
_LAYOUT_HEADINGS = ("The document, up to where your text goes", "The document after your text")
_COPIED_WORDS = 6  # a sentence of at least this many words taken from the document is a copy


def new_text(before: str, after: str, draft: str) -> bool:
    """A teacher's draft into a document worth learning from: text of its own, neither the request's
    headings nor a sentence of the document copied back."""
    if any(heading in draft for heading in _LAYOUT_HEADINGS):
        return False
    document = " ".join(f"{before} {after}".split())
    sentences = (" ".join(m.group().split()) for m in _SENTENCE.finditer(draft))
    return not any(len(s.split()) >= _COPIED_WORDS and s in document for s in sentences)


def worth_learning(record: dict[str, Any], draft: str) -> bool:
    """Whether a cleaned draft is kept: rewrites must keep the selection's numbers and be the passage,
    drafts into a document must be new text; other kinds are kept as they are."""
    slots = record.get("slots", {})
    if record.get("kind") == "rewrite-selection":
        return faithful_rewrite(slots.get("selection", ""), draft)
    if record.get("kind") == "document":
        return new_text(slots.get("before", ""), slots.get("after", ""), draft)
    return True


def load_pairs(path: Path) -> list[Pair]:
    """The cleaned pairs of a file the teacher wrote, less those not worth learning (worth_learning)."""
    pairs = []
    for line in path.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        draft = clean_draft(record.get("draft", ""), record.get("finish_reason") != "length")
        if draft and worth_learning(record, draft):
            pairs.append(Pair(int(record["id"]), record["text"], draft))
    return pairs


def read_pairs(path: Path) -> list[Pair]:
    """A file's pairs as written, neither cleaned nor filtered: AR's drafts of unseen instructions, the text a
    drafter is scored against (bench/unseen_drafts.py), not taught."""
    records = (json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip())
    return [Pair(int(record["id"]), record["text"], record["draft"]) for record in records]


def distinct_instructions(pairs: list[Pair]) -> list[Pair]:
    """The first pair of each instruction: sets written with other seeds draw some instructions again, and
    a second copy would be learned twice, or learned while its first copy is held out."""
    seen: set[str] = set()
    kept = []
    for pair in pairs:
        if pair.instruction not in seen:
            seen.add(pair.instruction)
            kept.append(pair)
    return kept


def is_held_out(pair: Pair, share: float = 0.05) -> bool:
    """A stable split by id, so the held-out set never changes as data is added."""
    digest = hashlib.sha256(str(pair.id).encode()).digest()
    return digest[0] < share * 256


def encode(tokenizer: Tokenizer, pair: Pair, length: int, ids: SpecialIds | None = None) -> Encoded:
    ids = ids or special_ids(tokenizer)
    prompt = [ids.user, *tokenizer.encode(pair.instruction).ids, ids.assistant]
    answer = [*tokenizer.encode(pair.draft).ids, ids.eos]
    answer = answer[: max(0, length - len(prompt))]
    padding = [ids.eos] * (length - len(prompt) - len(answer))
    return Encoded(prompt + answer + padding, len(prompt))
