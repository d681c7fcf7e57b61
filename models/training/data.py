"""Instruction -> draft pairs as fixed-length training sequences.

<|user|> instruction <|assistant|> draft, then end-of-text padding (learned too: it is how the model
says where the draft ends).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from tokenizers import Tokenizer

from models.training.tokenizer import SpecialIds, special_ids


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


def load_pairs(path: Path) -> list[Pair]:
    pairs = []
    for line in path.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if record.get("draft"):
            pairs.append(Pair(int(record["id"]), record["text"], record["draft"]))
    return pairs


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
