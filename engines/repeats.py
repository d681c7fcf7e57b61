"""No repeated n-grams: a draft never gets a token that would complete an n-gram it already holds.

The no-repeat n-gram rule of AR decoders (Hugging Face's no_repeat_ngram_size): `NoRepeatNgram`, a
llama.cpp logits processor, bans the token that would repeat the run of n ending at the next position.
Diffusion fills positions in any order, so the n-gram a token would complete may lie to its left, to its
right or around it: `ban_repeats` looks at every run of n positions that holds the masked position and
n - 1 settled tokens, and takes the token that would make it equal to a run of n settled tokens elsewhere
in the draft out of that position's proposals (its logit set to minus infinity), so the model's next
choice stands instead. Positions settled in the same pass see each other through `repeats_at`, which
engines/diffusion/placement.py asks as it places a pass's commits one by one. The prompt is not
counted: a draft may quote it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence

import numpy as np

# A run of n tokens with one position left open: (the tokens before the gap, the tokens after it).
Context = tuple[tuple[int, ...], tuple[int, ...]]


def settled_ngrams(tokens: np.ndarray, settled: np.ndarray, n: int) -> dict[Context, set[int]]:
    """For each way of leaving one position of a settled run of n tokens open, the tokens that filled it."""
    completions: dict[Context, set[int]] = defaultdict(set)
    if len(tokens) < n:
        return completions
    runs = np.lib.stride_tricks.sliding_window_view(settled, n).all(axis=1)
    for start in np.flatnonzero(runs):
        run = tuple(int(t) for t in tokens[start : start + n])
        for gap in range(n):
            completions[run[:gap], run[gap + 1 :]].add(run[gap])
    return completions


def completed_at(
    completions: dict[Context, set[int]], tokens: np.ndarray, settled: np.ndarray, position: int, n: int
) -> set[int]:
    """The tokens that would complete, at `position`, an n-gram in `completions` (settled_ngrams)."""
    banned: set[int] = set()
    for gap in range(n):
        lo, hi = position - gap, position - gap + n
        if lo < 0 or hi > len(tokens):
            continue
        others = np.r_[lo:position, position + 1 : hi]
        if not settled[others].all():
            continue
        banned |= completions.get(
            (tuple(int(t) for t in tokens[lo:position]), tuple(int(t) for t in tokens[position + 1 : hi])), set()
        )
    return banned


def ban_repeats(rows: np.ndarray, tokens: np.ndarray, settled: np.ndarray, positions: np.ndarray, n: int) -> None:
    """Set to minus infinity, in `rows` (one row per canvas position in `positions`), every token that would
    complete an n-gram already settled in `tokens` (the canvas; `settled` marks its committed positions)."""
    if n < 2:
        return
    completions = settled_ngrams(tokens, settled, n)
    if not completions:
        return
    for row, position in enumerate(int(p) for p in positions):
        banned = completed_at(completions, tokens, settled, position, n)
        if banned:
            rows[row, sorted(banned)] = -np.inf


def repeats_at(mask: int, n: int) -> Callable[[np.ndarray, int], np.ndarray]:
    """The n-gram rule as engines/diffusion/placement.py asks it: on a canvas whose `mask` positions are
    open, the tokens that would complete at a position an n-gram settled elsewhere."""

    def banned(tokens: np.ndarray, position: int) -> np.ndarray:
        if n < 2:
            return np.empty(0, dtype=np.int64)
        settled = tokens != mask
        settled[position] = False  # the position's own proposal is what is being judged
        completions = settled_ngrams(tokens, settled, n)
        return np.array(sorted(completed_at(completions, tokens, settled, position, n)), dtype=np.int64)

    return banned


class NoRepeatNgram:
    """A llama-cpp-python logits processor: the next token never completes an n-gram of the generated text
    (the prompt not counted). The n-grams seen so far are kept between calls, so a step costs one lookup."""

    def __init__(self, n: int, prompt_length: int) -> None:
        self.n, self.prompt_length = n, prompt_length
        self._seen: dict[tuple[int, ...], set[int]] = defaultdict(set)
        self._recorded_until = n - 1  # the n-grams ending before this many generated tokens are in _seen

    def __call__(self, input_ids: np.ndarray, scores: np.ndarray) -> np.ndarray:
        generated = input_ids[self.prompt_length :]
        n = self.n
        for end in range(self._recorded_until + 1, len(generated) + 1):
            run = tuple(int(t) for t in generated[end - n : end])
            self._seen[run[:-1]].add(run[-1])
        self._recorded_until = max(self._recorded_until, len(generated))
        if len(generated) >= n - 1:
            banned = self._seen.get(tuple(int(t) for t in generated[len(generated) - n + 1 :]))
            if banned:
                scores[list(banned)] = -np.inf
        return scores


class NoEndBefore:
    """A llama-cpp-python logits processor: no end-of-text token (`ends`) before `min_tokens` are generated."""

    def __init__(self, ends: Sequence[int], prompt_length: int, min_tokens: int) -> None:
        self.ends, self.prompt_length, self.min_tokens = list(ends), prompt_length, min_tokens

    def __call__(self, input_ids: np.ndarray, scores: np.ndarray) -> np.ndarray:
        if len(input_ids) - self.prompt_length < self.min_tokens:
            scores[self.ends] = -np.inf
        return scores
