"""What the sampler needs from a model, and nothing else."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, Protocol

import numpy as np

from engines.messages import Instruction
from engines.threads import Foreground

# How a pass reuses keys and values computed earlier. Bidirectional attention (Fast-dLLM's approximate
# caches): "none" decodes the whole sequence; "prefix" keeps the positions before the window; "dual" keeps
# the positions after it too, so a pass decodes the window alone. "block" is block-causal attention (SDAR,
# Fast-dLLM v2): blocks aligned at absolute positions, bidirectional inside a block and causal across
# blocks, so a settled block's keys and values are final: written once by a clean pass and never
# recomputed, and a pass decodes its block alone and sees nothing after it. Exact for models trained
# block-causally; an approximation of full attention for the others.
CacheMode = Literal["none", "prefix", "dual", "block"]
CACHE_MODES: tuple[CacheMode, ...] = ("none", "prefix", "dual", "block")
# The precision of cached keys and values (llama.cpp): auto chooses by the model's size.
KvChoice = Literal["auto", "f16", "f32"]


class DiffusionBackend(Protocol):
    """Answers "logits for these canvas positions given this sequence" for one loaded model."""

    mask_token_id: int
    eos_token_ids: frozenset[int]
    vocab_size: int
    context_length: int
    # The cache its passes use between a window's first pass (which decodes everything) and the window's
    # end: the router's cost model charges a pass for what it decodes.
    cache_mode: CacheMode
    # Trained block-causally (SDAR, Fast-dLLM v2, Sharpen's block drafter): it never reads text after the
    # block it refines, so a document's text after the cursor has to be given in the prompt.
    block_causal: bool
    # Completions the session runs in the foreground: passes give way to them, and use a thread fewer
    # while the user is typing.
    foreground: Foreground

    def logits(self, sequence: np.ndarray, start: int, end: int, stable: int) -> np.ndarray:
        """Float32 logits (end - start, vocab): the model's prediction for each position in [start, end).

        Positions before `stable` hold final tokens that will not change during this generation, so a
        backend may keep them cached between calls. Any logit shift (Dream) is the backend's business.
        Under "block", [start, end) lies in one aligned block, everything before the block is settled, and
        nothing from `end` on is seen.
        """
        ...

    def reset(self, cache: bool = True, block_length: int = 0, suffix: bool = False) -> CacheMode:
        """Forget any cache: a new generation starts; return the cache its passes will use. `cache` False:
        this generation's schedule has no point where a cache could be brought up to date (Dream's
        timestep schedule refines the whole canvas to the end), so every pass is computed in full.
        `block_length`: the blocks the sampler refines in turn (under "block", aligned at absolute
        positions: its unit of attention). `suffix`: the canvas has text after it, which block-causal
        attention cannot see, so "block" gives way to the backend's best bidirectional cache."""
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


def generation_cache(configured: CacheMode, cache: bool, suffix: bool, bidirectional: CacheMode) -> CacheMode:
    """The cache one generation uses: `configured` (what the backend runs), none where the schedule allows
    no cache, and `bidirectional` (the backend's best full-attention cache) in place of "block" when the
    canvas has text after it."""
    if not cache:
        return "none"
    if configured == "block" and suffix:
        return bidirectional
    return configured


def block_start(position: int, block_length: int) -> int:
    """The first position of the aligned block holding `position`."""
    return position - position % block_length
