"""A small byte-level BPE for the embedded diffusion model, in the form llama.cpp reads (GPT-2 style).

A 4096-token vocabulary keeps the embedding small (the model is a few million parameters; SmolLM2's
49,152-token vocabulary alone would be most of it and slow training to a third).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

EOS = "<|endoftext|>"
MASK = "<|mask|>"
USER = "<|user|>"
ASSISTANT = "<|assistant|>"
SPECIALS = (EOS, MASK, USER, ASSISTANT)
# What llama.cpp renders through the model's chat template, and what training builds by hand.
CHAT_TEMPLATE = (
    "{% for message in messages %}{% if message['role'] == 'user' %}"
    + USER
    + "{{ message['content'] }}{% endif %}{% endfor %}{% if add_generation_prompt %}"
    + ASSISTANT
    + "{% endif %}"
)


@dataclass(frozen=True)
class SpecialIds:
    eos: int
    mask: int
    user: int
    assistant: int


def train_tokenizer(texts: Iterable[str], vocab_size: int = 4096) -> Tokenizer:
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIALS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(texts, trainer=trainer)
    return tokenizer


def special_ids(tokenizer: Tokenizer) -> SpecialIds:
    ids = [tokenizer.token_to_id(t) for t in SPECIALS]
    found = [i for i in ids if i is not None]
    if len(found) < len(ids):
        raise ValueError("the tokenizer lacks Sharpen's special tokens")
    return SpecialIds(*found)


def gguf_vocabulary(tokenizer: Tokenizer) -> tuple[list[str], list[int], list[str]]:
    """Tokens in id order, their GGUF token types (1 normal, 3 control) and the merges ("a b")."""
    vocab = tokenizer.get_vocab()
    tokens = [""] * len(vocab)
    for token, index in vocab.items():
        tokens[index] = token
    types = [3 if token in SPECIALS else 1 for token in tokens]
    merges = [" ".join(pair) if isinstance(pair, tuple | list) else pair for pair in _merges(tokenizer)]
    return tokens, types, merges


def _merges(tokenizer: Tokenizer) -> list[str | list[str]]:
    """The merges as tokenizer.json stores them: ["a", "b"] pairs (older files: "a b" strings)."""
    import json

    return json.loads(tokenizer.to_str())["model"]["merges"]
