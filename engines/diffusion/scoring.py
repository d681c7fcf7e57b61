"""Turn logits into proposed tokens, their probabilities and a ranking score, per remasking rule."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engines.diffusion.settings import Algorithm


@dataclass(frozen=True)
class Proposals:
    tokens: np.ndarray  # (m,) proposed token per position
    probabilities: np.ndarray  # (m,) probability of the proposed token
    scores: np.ndarray  # (m,) higher commits first


def _softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max(axis=1, keepdims=True)
    np.exp(shifted, out=shifted)
    shifted /= shifted.sum(axis=1, keepdims=True)
    return shifted


def _logsumexp(logits: np.ndarray) -> np.ndarray:
    peak = logits.max(axis=1, keepdims=True)
    return peak + np.log(np.exp(logits - peak).sum(axis=1, keepdims=True))


def _candidates(logits: np.ndarray, top_k: int, top_p: float) -> tuple[np.ndarray, np.ndarray]:
    """Reduce each row to its top-k / top-p candidates: (token ids (m, C), logits (m, C), -inf where cut).

    Sampling then works on C columns instead of the whole vocabulary. Without a top-k, top-p looks at
    the 1024 most likely tokens first and sorts a full row only where those do not reach top_p.
    """
    vocab = logits.shape[1]
    width = min(vocab, top_k if top_k > 0 else 1024)
    ids = (
        np.argpartition(-logits, width - 1, axis=1)[:, :width]
        if width < vocab
        else np.tile(np.arange(vocab), (len(logits), 1))
    )
    values = np.take_along_axis(logits, ids, axis=1)
    order = np.argsort(-values, axis=1, kind="stable")
    ids, values = np.take_along_axis(ids, order, axis=1), np.take_along_axis(values, order, axis=1)
    if top_p < 1.0:
        # Mass is measured over the top-k set when there is one, else over the whole vocabulary.
        total = _logsumexp(values if top_k > 0 else logits)
        probs = np.exp(values - total)
        cumulative = np.cumsum(probs, axis=1)
        short = (cumulative[:, -1] < top_p) & (width < vocab)
        if short.any():  # the candidates hold too little mass: take those rows in full
            full_ids, full_values = _candidates(logits[short], vocab, 1.0)
            return _candidates_padded(ids, values, short, full_ids, full_values, top_p, total)
        values = np.where(cumulative - probs >= top_p, -np.inf, values)
    return ids, values


def _candidates_padded(
    ids: np.ndarray,
    values: np.ndarray,
    short: np.ndarray,
    full_ids: np.ndarray,
    full_values: np.ndarray,
    top_p: float,
    total: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    width = full_ids.shape[1]
    all_ids = np.zeros((len(ids), width), dtype=ids.dtype)
    all_values = np.full((len(ids), width), -np.inf, dtype=values.dtype)
    all_ids[:, : ids.shape[1]] = ids
    all_values[:, : ids.shape[1]] = values
    all_ids[short], all_values[short] = full_ids, full_values
    probs = np.exp(all_values - total)
    cumulative = np.cumsum(probs, axis=1)
    return all_ids, np.where(cumulative - probs >= top_p, -np.inf, all_values)


def propose(
    logits: np.ndarray,
    *,
    algorithm: Algorithm,
    temperature: float,
    top_k: int,
    top_p: float,
    rng: np.random.Generator,
) -> Proposals:
    """Propose a token for every row of `logits` (m, vocab).

    Greedy at temperature 0; otherwise Gumbel-max sampling from softmax(logits / T) after top-k and
    top-p filtering, with the noise drawn in float64 so that rare tokens are not lost to rounding.
    """
    rows = np.arange(logits.shape[0])
    work = logits.astype(np.float32, copy=True)
    ids: np.ndarray | None = None
    if temperature > 0:
        work /= temperature
        if top_k > 0 or top_p < 1.0:
            ids, work = _candidates(work, top_k, top_p)
        uniform = rng.random(work.shape)  # float64
        gumbel = -np.log(-np.log(np.clip(uniform, 1e-300, 1.0)))
        columns = np.argmax(work.astype(np.float64) + gumbel, axis=1)
    else:
        columns = np.argmax(work, axis=1)
    probs = _softmax(work)
    chosen = probs[rows, columns]
    tokens = columns if ids is None else ids[rows, columns]
    if algorithm == "confidence":
        scores = chosen.astype(np.float64)
    elif algorithm == "margin":
        top_two = np.partition(probs, -2, axis=1)[:, -2:] if probs.shape[1] > 1 else np.stack([probs[:, 0]] * 2, 1)
        scores = (top_two[:, 1] - top_two[:, 0]).astype(np.float64)
    elif algorithm == "entropy":
        with np.errstate(divide="ignore", invalid="ignore"):
            plogp = np.where(probs > 0, probs * np.log(probs), 0.0)
        scores = plogp.sum(axis=1).astype(np.float64)  # negative entropy: peaked rows score higher
    else:  # random, origin: the order is random
        scores = rng.random(len(rows))
    return Proposals(tokens=tokens.astype(np.int64), probabilities=chosen.astype(np.float64), scores=scores)
