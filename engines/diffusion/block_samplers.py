"""The authors' own samplers for the block-causal models, behind DiffusionSettings.sampler.

"sdar" is SDAR's `block_diffusion_generate` (JetAstra/SDAR generate.py); "fast_dllm_v2" is Fast-dLLM v2's
`generate` (its modeling.py; v2/generation_functions.py). The refinement loop stays in sampler.py, which
asks these functions what a pass proposes and which of its masked positions it commits. Where Sharpen
differs from the published code, on purpose:

- the mask token is never proposed (as everywhere in Sharpen);
- at a temperature, tokens are drawn with numpy's generator (Gumbel-max over the same filtered
  distribution), not torch.multinomial: the same distribution, other draws for a seed; at temperature 0
  the argmax (SDAR has no greedy mode: its temperature divides);
- SDAR's step can ask torch.topk for more positions than are still masked (a block that began with prompt
  tokens, or a low_confidence_dynamic step that committed more than its count): it then picks positions
  already settled, prompt included, and writes a fresh sample over them. Sharpen commits the masks that
  remain instead (`sdar_choice`);
- torch.topk's and torch.argmax's order among equal confidences is not specified; here the leftmost goes
  first.
"""

from __future__ import annotations

import numpy as np

# Top-p first looks at this many of a row's likeliest tokens, and sorts the whole row only where their mass
# does not reach p.
TOP_P_CANDIDATES = 1024


def authors_proposals(
    logits: np.ndarray, *, temperature: float, top_k: int, top_p: float, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """A token and its probability per row of `logits` (m, vocab), as SDAR's
    sample_with_temperature_topk_topp and Fast-dLLM v2's sample_with_top_p draw them: logits / temperature,
    top-k keeping every token tied with the k-th, top-p keeping each token whose likelier tokens hold at
    most p (the likeliest always); the probability is the drawn token's under the softmax of what is
    left. Temperature 0: the argmax and its probability under the plain softmax (Fast-dLLM v2's greedy)."""
    rows = np.arange(len(logits))
    work = logits.astype(np.float64)
    if temperature <= 0:
        tokens = np.argmax(work, axis=1)
        return tokens, _softmax(work)[rows, tokens]
    work /= temperature
    if 0 < top_k < work.shape[1]:
        kth = np.partition(work, -top_k, axis=1)[:, -top_k, None]
        work = np.where(work >= kth, work, -np.inf)
    if top_p < 1.0:
        work = np.where(_beyond_top_p(work, top_p), -np.inf, work)
    probabilities = _softmax(work)
    gumbel = -np.log(-np.log(np.clip(rng.random(work.shape), 1e-300, 1.0)))
    tokens = np.argmax(work + gumbel, axis=1)
    return tokens, probabilities[rows, tokens]


def _beyond_top_p(work: np.ndarray, top_p: float) -> np.ndarray:
    """True where a token's likelier tokens already hold more than `top_p` of the row's mass."""
    removed = np.zeros(work.shape, dtype=bool)
    width = min(work.shape[1], TOP_P_CANDIDATES)
    candidates = np.argpartition(-work, width - 1, axis=1)[:, :width]
    peak = work.max(axis=1, keepdims=True)
    total = np.log(np.exp(work - peak).sum(axis=1, keepdims=True)) + peak
    for row in range(len(work)):
        ids = candidates[row][np.argsort(-work[row, candidates[row]], kind="stable")]
        before = _mass_before(work[row, ids], total[row])
        if before[-1] <= top_p and width < work.shape[1]:  # the cut lies beyond the candidates: sort it all
            ids = np.argsort(-work[row], kind="stable")
            before = _mass_before(work[row, ids], total[row])
        cut = before > top_p
        removed[row] = True
        removed[row, ids[~cut]] = False
    return removed


def _mass_before(sorted_logits: np.ndarray, total: np.ndarray) -> np.ndarray:
    probabilities = np.exp(sorted_logits - total)
    return np.cumsum(probabilities) - probabilities


def _softmax(work: np.ndarray) -> np.ndarray:
    shifted = np.exp(work - work.max(axis=1, keepdims=True))
    return shifted / shifted.sum(axis=1, keepdims=True)


def sdar_choice(confidence: np.ndarray, count: int, threshold: float | None) -> np.ndarray:
    """Indices into a block's masked positions that one SDAR step commits, `count` being this step's
    get_num_transfer_tokens share of the block. With a threshold (low_confidence_dynamic): every position
    more confident than it, where there are at least `count`; otherwise, and without one
    (low_confidence_static), the `count` most confident. Capped at the masks there are (SDAR's top-k is
    not: see the module's docstring)."""
    count = max(1, min(count, len(confidence)))
    if threshold is not None:
        above = np.flatnonzero(confidence > threshold)
        if len(above) >= count:
            return above
    return np.sort(np.argsort(-confidence, kind="stable")[:count])


def fast_dllm_v2_choice(confidence: np.ndarray, threshold: float | None) -> np.ndarray:
    """Indices into a sub-block's masked positions that one Fast-dLLM v2 step commits: every one more
    confident than the threshold, and the most confident one always (alone where no threshold is set)."""
    chosen = confidence > threshold if threshold is not None else np.zeros(len(confidence), dtype=bool)
    chosen[int(np.argmax(confidence))] = True
    return np.flatnonzero(chosen)


def sub_block_at(position: int, block_start: int, size: int, window: tuple[int, int]) -> tuple[int, int]:
    """The sub-block [lo, hi) holding `position`: sub-blocks of `size` cut from the aligned block's start
    (`block_start`, which may lie before the window, in the prompt), clipped to the window."""
    lo = block_start + (position - block_start) // size * size
    return max(lo, window[0]), min(lo + size, window[1])
