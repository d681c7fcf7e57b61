"""A backend whose logits the test chooses: it tests the sampler's arithmetic, not a model."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from engines.diffusion.backend import CacheMode
from engines.threads import Foreground

VOCAB = 12
MASK = 11
EOS = 10
# Token t's text is a letter, so drafts read as strings: 0 -> "a", 1 -> "b", ...; EOS -> "<eos>".
PIECES = [chr(ord("a") + t) for t in range(EOS)] + ["<eos>", "<mask>"]

LogitsFn = Callable[[np.ndarray, int, int], np.ndarray]


@dataclass
class Call:
    sequence: np.ndarray
    start: int
    end: int
    stable: int


@dataclass
class ScriptedBackend:
    """`script(sequence, start, end)` returns logits (end - start, VOCAB) for positions [start, end)."""

    script: LogitsFn
    mask_token_id: int = MASK
    eos_token_ids: frozenset[int] = frozenset({EOS})
    vocab_size: int = VOCAB
    context_length: int = 4096
    cache_mode: CacheMode = "none"
    block_causal: bool = False
    foreground: Foreground = field(default_factory=Foreground)
    calls: list[Call] = field(default_factory=list)
    pieces: Sequence[str] = tuple(PIECES)

    def logits(self, sequence: np.ndarray, start: int, end: int, stable: int) -> np.ndarray:
        self.calls.append(Call(sequence.copy(), start, end, stable))
        return np.asarray(self.script(sequence, start, end), dtype=np.float32)

    def reset(self, cache: bool = True, block_length: int = 0, suffix: bool = False) -> CacheMode:
        self.calls.clear()
        return self.cache_mode if cache else "none"

    def piece(self, token_id: int) -> str:
        return self.pieces[token_id]

    def decode(self, tokens: Sequence[int]) -> str:
        return "".join(self.pieces[t] for t in tokens)


def vocabulary_backend(script: LogitsFn, pieces: Sequence[str], mask: int, eos: int) -> ScriptedBackend:
    """A scripted backend whose tokens read as `pieces` (words, newlines) instead of single letters."""
    return ScriptedBackend(
        script, mask_token_id=mask, eos_token_ids=frozenset({eos}), vocab_size=len(pieces), pieces=pieces
    )


def one_hot_logits(targets: Sequence[int], confidence: Sequence[float]) -> np.ndarray:
    """Logits where position i predicts targets[i] with probability confidence[i].

    The rest is spread evenly over the other tokens but the mask token, which a trained model never
    predicts (and which the sampler never commits).
    """
    rows = np.zeros((len(targets), VOCAB), dtype=np.float64)
    for i, (target, p) in enumerate(zip(targets, confidence, strict=True)):
        rest = (1 - p) / (VOCAB - 2)
        rows[i, :] = np.log(rest)
        rows[i, target] = np.log(p)
        if target != MASK:
            rows[i, MASK] = -np.inf
    return rows


def fixed_script(targets: Sequence[int], confidence: Sequence[float], offset: int) -> LogitsFn:
    """Every call predicts the same targets with the same confidences, for canvas positions from `offset`."""
    table = one_hot_logits(targets, confidence)
    return lambda _seq, start, end: table[start - offset : end - offset]
