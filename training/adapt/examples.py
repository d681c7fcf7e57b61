"""The pairs an adapter learns from, encoded as the llama.cpp backend renders them (the base's chat template and
tokenizer): training, held-out and unseen sets, saved for a machine without llama.cpp, and batched."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

import torch

from training.data import Pair, distinct_instructions, is_held_out, load_pairs, read_pairs

HELD_OUT = 32  # pairs evaluated: enough to compare runs, few enough to evaluate every few minutes


@dataclass(frozen=True)
class Example:
    prompt: list[int]
    answer: list[int]  # the draft's tokens and end-of-text


def encode_pairs(base: Path, pairs: list[Pair], max_answer: int) -> tuple[list[Example], int]:
    """Prompts through the base's chat template and tokenizer, as the llama.cpp backend renders them."""
    import llama_cpp
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    from models.gguf_info import inspect_gguf

    info = inspect_gguf(base)
    vocab = llama_cpp.Llama(model_path=str(base), vocab_only=True, verbose=False)
    token_text = vocab._model.token_get_text
    eos = info.eos_token_id if info.eos_token_id is not None else 0
    # engines/chat_template.py's rendering (models/ may not import engines/; a test checks they agree).
    formatter = Jinja2ChatFormatter(
        template=info.chat_template or "", eos_token=token_text(eos), bos_token=token_text(info.bos_token_id or 0)
    )
    examples = []
    for pair in pairs:
        rendered = formatter(messages=[{"role": "user", "content": pair.instruction}])
        prompt = vocab.tokenize(rendered.prompt.encode(), add_bos=not rendered.added_special, special=True)
        answer = [*vocab.tokenize(pair.draft.encode(), add_bos=False, special=False)[: max_answer - 1], eos]
        examples.append(Example(prompt, answer))
    return examples, eos


def held_out_pairs(pairs: list[Pair]) -> list[Pair]:
    """The evaluation set: the first 32 held-out pairs (a training pair where none is held out)."""
    return ([p for p in pairs if is_held_out(p)] or [p for p in pairs if not is_held_out(p)][:1])[:HELD_OUT]


def evaluation_batches(
    base: Path, pairs: list[Pair], max_answer: int, batch: int
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    examples, eos = encode_pairs(base, pairs, max_answer)
    return held_batches(examples, batch, eos)


def held_batches(examples: list[Example], batch: int, eos: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    return [collate(examples[i : i + batch], 0, eos) for i in range(0, len(examples), batch)]


EXAMPLE_SETS = ("train", "held", "unseen")


@dataclass(frozen=True)
class EncodedPairs:
    train: list[Example]
    held: list[Example]
    eos: int
    base_sha256: str  # the base whose tokenizer and chat template encoded them
    unseen: list[Example] = field(default_factory=list)  # AdaptPlan.unseen's pairs


def encode_data(
    data: tuple[Path, ...],
    base: Path,
    max_answer: int,
    unseen: Path | None = None,
    writing_share: float = 0.0,
    seed: int = 0,
) -> EncodedPairs:
    """The files' pairs, and writing cases added to make `writing_share` of the training pairs (after the
    files' pairs, so that the held-out pairs evaluated stay the files' own)."""
    from models.hub import sha256_of
    from training.adapt.writing import writing_count, writing_pairs

    pairs = distinct_instructions([p for path in data for p in load_pairs(path)])
    made = writing_count(writing_share, sum(not is_held_out(p) for p in pairs))
    pairs += writing_pairs(made, seed) if made else []
    train, eos = encode_pairs(base, [p for p in pairs if not is_held_out(p)], max_answer)
    held, _ = encode_pairs(base, held_out_pairs(pairs), max_answer)
    unseen_examples = encode_pairs(base, read_pairs(unseen), max_answer)[0] if unseen else []
    return EncodedPairs(train, held, eos, sha256_of(base), unseen_examples)


def write_examples(encoded: EncodedPairs, path: Path) -> Path:
    """The encoded pairs as plain lists (torch.save), for a machine that has torch but not llama.cpp."""
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = {name: [(e.prompt, e.answer) for e in getattr(encoded, name)] for name in EXAMPLE_SETS}
    torch.save({**rows, "eos": encoded.eos, "base_sha256": encoded.base_sha256}, path)
    return path


def read_examples(path: Path, base: Path) -> EncodedPairs:
    from models.hub import sha256_of

    saved = torch.load(path, weights_only=True)
    if saved["base_sha256"] != sha256_of(base):
        raise ValueError(f"{path} was encoded for another base than {base}")
    train, held, unseen = ([Example(list(p), list(a)) for p, a in saved.get(name, [])] for name in EXAMPLE_SETS)
    return EncodedPairs(train, held, int(saved["eos"]), saved["base_sha256"], unseen)


def batches(examples: list[Example], size: int, rng: random.Random) -> list[list[Example]]:
    """An epoch's batches of rows of similar length (less padding), in random order."""
    order = examples[:]
    rng.shuffle(order)
    span = size * 16
    chunks = [
        sorted(order[i : i + span], key=lambda e: len(e.prompt) + len(e.answer)) for i in range(0, len(order), span)
    ]
    result = [chunk[i : i + size] for chunk in chunks for i in range(0, len(chunk), size)]
    rng.shuffle(result)
    return result


def collate(rows: list[Example], padding: int, eos: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Tokens (batch, n) and where the answer is: each row's answer then end-of-text to a common length."""
    length = max(len(e.prompt) + len(e.answer) for e in rows) + padding
    tokens = torch.full((len(rows), length), eos, dtype=torch.long)
    answer = torch.zeros((len(rows), length), dtype=torch.bool)
    for i, example in enumerate(rows):
        sequence = example.prompt + example.answer
        tokens[i, : len(sequence)] = torch.tensor(sequence)
        answer[i, len(example.prompt) :] = True
    return tokens, answer
