"""What the sampler needs from a model, and nothing else."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, Protocol

import numpy as np

from engines.messages import Instruction

# How a pass reuses keys and values computed earlier (Fast-dLLM): "none" decodes the whole sequence;
# "prefix" keeps the positions before the window; "dual" keeps the positions after it too, so a pass
# decodes the window alone.
CacheMode = Literal["none", "prefix", "dual"]
CACHE_MODES: tuple[CacheMode, ...] = ("none", "prefix", "dual")


class DiffusionBackend(Protocol):
    """Answers "logits for these canvas positions given this sequence" for one loaded model."""

    mask_token_id: int
    eos_token_ids: frozenset[int]
    vocab_size: int
    context_length: int
    # The cache its passes use between a window's first pass (which decodes everything) and the window's
    # end: the router's cost model charges a pass for what it decodes.
    cache_mode: CacheMode

    def logits(self, sequence: np.ndarray, start: int, end: int, stable: int) -> np.ndarray:
        """Float32 logits (end - start, vocab): the model's prediction for each position in [start, end).

        Positions before `stable` hold final tokens that will not change during this generation, so a
        backend may keep them cached between calls. Any logit shift (Dream) is the backend's business.
        """
        ...

    def reset(self, cache: bool = True) -> None:
        """Forget any cache: a new generation starts. `cache` False: this generation's schedule has no point
        where a cache could be brought up to date (Dream's timestep schedule refines the whole canvas to
        the end), so every pass is computed in full."""
        ...

    def piece(self, token_id: int) -> str:
        """The text of one token, for display."""
        ...

    def decode(self, tokens: Sequence[int]) -> str: ...


class TextDiffusionBackend(DiffusionBackend, Protocol):
    """A DiffusionBackend that also turns text into prompts: what the engine drives."""

    backend: str

    def tokenize(self, text: str, *, add_bos: bool, special: bool = False) -> list[int]: ...

    def instruction_tokens(self, instruction: Instruction) -> list[int]: ...
