"""A pass's commits placed one by one, so rules that read a position's neighbours see its pass-mates too.

A pass proposes every position from the same canvas, so a rule applied to the proposals (the n-gram rule,
the doubled-word rule) sees only the text settled before the pass, not the tokens settling beside it. Here
the commits are placed best ranked first, each against the canvas with those before it in place; a token a
rule bans there gives way to its row's likeliest allowed token, so the pass still settles as many
positions and costs no extra forward pass.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

# (the canvas as placed so far, a position) -> the tokens that position may not take
BannedAt = Callable[[np.ndarray, int], np.ndarray]


def place(
    rows: np.ndarray,
    chosen: np.ndarray,
    canvas: np.ndarray,
    positions: np.ndarray,
    tokens: np.ndarray,
    probabilities: np.ndarray,
    priority: np.ndarray,
    rules: Sequence[BannedAt],
    never: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """The tokens (and their probabilities) that settle at `positions`, the logits of each in `rows[chosen]`:
    `tokens` where no rule bans them, else the row's likeliest token no rule bans that is not in `never`
    (end-of-text, which the end-of-text rule places; the original stays where every token is banned).
    Commits are placed in `priority` order (the pass's ranking score). A substitute's probability is the
    plain softmax of its row: at temperature 0, the scale the proposals' are on."""
    placed = canvas.copy()
    tokens, probabilities = tokens.copy(), probabilities.copy()
    for index in np.argsort(-priority, kind="stable"):
        position = int(positions[index])
        banned = np.concatenate([rule(placed, position) for rule in rules]).astype(np.int64)
        if int(tokens[index]) in banned:
            logits = rows[int(chosen[index])].astype(np.float64)
            allowed = logits.copy()
            allowed[banned] = -np.inf
            allowed[never] = -np.inf
            best = int(np.argmax(allowed))
            if np.isfinite(allowed[best]):
                peak = logits.max()
                probabilities[index] = np.exp(logits[best] - peak) / np.exp(logits - peak).sum()
                tokens[index] = best
        placed[position] = tokens[index]
    return tokens, probabilities
