"""No word right beside itself: a pass never settles " lesson" next to " lesson" ("the the", "on on").

Positions settled in the same pass are guessed independently, each from a distribution that mixes the
readings the model cannot yet tell apart: "The lesson plan" one token to the left or to the right. At one
pass a block every position of the block settles at once, so neighbours take the same word ("The lesson
lesson plan") far more often than a model that sees its neighbour would write it. A word here is a token
that starts with a space and a letter (byte-level BPE vocabularies such as SmolLM2's, Qwen's and LLaDA's
keep the space in a token's piece); digits, punctuation and pieces inside a word may repeat ("100", "!!",
"Mississippi").
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np


def is_word(piece: str) -> bool:
    return len(piece) >= 2 and piece[0] == " " and piece[1].isalpha()


class DoubledWords:
    """The rule for one vocabulary: which tokens are words, and which a position may not take. `edges` are
    the tokens just outside the canvas (the prompt's last, the suffix's first; -1 for none), so a draft
    does not start with the word its prompt ends with."""

    def __init__(self, piece: Callable[[int], str], vocab_size: int) -> None:
        self.words = np.array([is_word(piece(token)) for token in range(vocab_size)], dtype=bool)
        self.edges = (-1, -1)

    def banned(self, tokens: np.ndarray, position: int) -> np.ndarray:
        """The words beside `position` in `tokens` (the canvas): the tokens it may not take."""
        left = int(tokens[position - 1]) if position > 0 else self.edges[0]
        right = int(tokens[position + 1]) if position + 1 < len(tokens) else self.edges[1]
        beside = {t for t in (left, right) if 0 <= t < len(self.words) and self.words[t]}
        return np.array(sorted(beside), dtype=np.int64)

    def ban(self, rows: np.ndarray, tokens: np.ndarray, positions: np.ndarray) -> None:
        """Set to minus infinity, in `rows` (one per canvas position in `positions`), the words beside it."""
        for row, position in enumerate(int(p) for p in positions):
            banned = self.banned(tokens, position)
            if len(banned):
                rows[row, banned] = -np.inf
