"""The refinement loop: a canvas of masks between a prompt and an optional suffix, refined pass by pass.

Numpy only. Everything model-specific sits behind DiffusionBackend.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence

import numpy as np

from engines.cancel import NEVER_CANCELLED, CancelToken
from engines.diffusion.backend import DiffusionBackend
from engines.diffusion.schedule import even_split, steps_per_block, timestep_commits, timestep_probability
from engines.diffusion.scoring import propose
from engines.diffusion.settings import DiffusionSettings
from engines.events import MASKED_PIECE, Done, DraftStats, FinishReason, Pass
from engines.threads import FOREGROUND

# Added to the score of end-of-text proposals under eos="last": they still rank among themselves.
EOS_PENALTY = -1e6


class _Canvas:
    """The canvas tokens plus the bookkeeping every pass reports."""

    def __init__(self, backend: DiffusionBackend, prompt: Sequence[int], length: int, suffix: Sequence[int]):
        self.backend = backend
        self.mask = backend.mask_token_id
        self.offset = len(prompt)
        self.length = length
        self.sequence = np.array([*prompt, *([self.mask] * length), *suffix], dtype=np.int64)
        self.confidence = np.zeros(length, dtype=np.float64)
        self._pieces: dict[int, str] = {}

    @property
    def tokens(self) -> np.ndarray:
        return self.sequence[self.offset : self.offset + self.length]

    def masked_positions(self, lo: int, hi: int) -> np.ndarray:
        return lo + np.flatnonzero(self.tokens[lo:hi] == self.mask)

    def first_mask(self) -> int:
        masked = np.flatnonzero(self.tokens == self.mask)
        return int(masked[0]) if len(masked) else self.length

    def first_eos(self, upto: int) -> int | None:
        eos = self.backend.eos_token_ids
        for position in range(upto):
            if int(self.tokens[position]) in eos:
                return position
        return None

    def stable_prefix(self) -> int:
        """Committed positions from the start up to the first mask, cut at an end-of-text token."""
        first_mask = self.first_mask()
        eos = self.first_eos(first_mask)
        return first_mask if eos is None else eos

    def piece(self, token: int) -> str:
        if token == self.mask:
            return MASKED_PIECE
        cached = self._pieces.get(token)
        if cached is None:
            cached = self._pieces[token] = self.backend.piece(token)
        return cached

    def snapshot(
        self, index: int, committed: np.ndarray, confidences: np.ndarray, window: tuple[int, int], elapsed: float
    ) -> Pass:
        tokens = [int(t) for t in self.tokens]
        return Pass(
            index=index,
            canvas=tuple(tokens),
            pieces=tuple(self.piece(t) for t in tokens),
            masked=tuple(t == self.mask for t in tokens),
            committed=tuple(int(p) for p in committed),
            confidences=tuple(float(c) for c in confidences),
            stable_prefix=self.stable_prefix(),
            window=window,
            elapsed_s=elapsed,
        )


class DiffusionSampler:
    def __init__(self, backend: DiffusionBackend) -> None:
        self.backend = backend

    def generate(
        self,
        prompt: Sequence[int],
        length: int,
        settings: DiffusionSettings,
        *,
        suffix: Sequence[int] = (),
        cancel: CancelToken | None = None,
    ) -> Iterator[Pass | Done]:
        """Refine a canvas of `length` masks after `prompt` (and before `suffix`); one Pass per forward pass."""
        settings = settings.checked(length)
        cancel = cancel or NEVER_CANCELLED
        canvas = _Canvas(self.backend, prompt, length, suffix)
        rng = np.random.default_rng(settings.seed)
        eos_ids = np.array(sorted(self.backend.eos_token_ids), dtype=np.int64)
        self.backend.reset()
        start = time.perf_counter()
        backend_s = waited_s = 0.0
        passes = 0
        finish: FinishReason = "length"

        for lo, hi, budget in self._windows(settings, length):
            step = 0
            while len(canvas.masked_positions(lo, hi)):
                if cancel.cancelled:
                    finish = "cancelled"
                    break
                masked = canvas.masked_positions(lo, hi)
                waited_s += FOREGROUND.wait()  # a completion (ghost text) runs first; at most a second
                before = time.perf_counter()
                logits = self.backend.logits(
                    canvas.sequence, canvas.offset + lo, canvas.offset + hi, canvas.offset + canvas.first_mask()
                )
                backend_s += time.perf_counter() - before
                rows = logits[masked - lo]
                # A committed mask token would leave its position masked for ever: never propose it.
                rows[:, canvas.mask] = -np.inf
                proposals = propose(
                    rows,
                    algorithm=settings.algorithm,
                    temperature=settings.temperature,
                    top_k=settings.top_k,
                    top_p=settings.top_p,
                    rng=rng,
                )
                scores, blocked = self._eos_rule(settings, proposals.tokens, proposals.scores, masked, canvas, eos_ids)
                chosen = self._choose(settings, scores, proposals.probabilities, blocked, masked, step, budget, rng)
                positions = masked[chosen]
                canvas.tokens[positions] = proposals.tokens[chosen]
                canvas.confidence[positions] = proposals.probabilities[chosen]
                passes += 1
                step += 1
                if settings.stop_at_eos and canvas.first_eos(canvas.first_mask()) is not None:
                    finish = "eos"
                yield canvas.snapshot(
                    passes - 1, positions, proposals.probabilities[chosen], (lo, hi), time.perf_counter() - start
                )
                if finish == "eos":
                    break
            if finish != "length":
                break

        stable = canvas.stable_prefix()
        end_at = stable if finish in ("eos", "cancelled") else length
        if finish == "length":
            eos = canvas.first_eos(length)
            if eos is not None:
                end_at, finish = eos, "eos"
        text_tokens = [int(t) for t in canvas.tokens[:end_at]]
        yield Done(
            text=self.backend.decode(text_tokens),
            stats=DraftStats(
                prompt_tokens=canvas.offset,
                canvas_tokens=length,
                generated_tokens=len(text_tokens),
                passes=passes,
                total_s=time.perf_counter() - start,
                backend_s=backend_s,
                finish_reason=finish,
                waited_s=waited_s,
            ),
        )

    @staticmethod
    def _windows(settings: DiffusionSettings, length: int) -> Iterator[tuple[int, int, int]]:
        """The canvas windows refined in turn, each with its pass budget (ignored under a threshold)."""
        if settings.schedule == "timestep":
            yield 0, length, settings.steps
            return
        n_blocks = settings.n_blocks(length)
        budgets = steps_per_block(settings.steps, n_blocks) if settings.threshold is None else [0] * n_blocks
        for block, budget in enumerate(budgets):
            lo = block * settings.block_length
            yield lo, min(length, lo + settings.block_length), budget

    @staticmethod
    def _eos_rule(
        settings: DiffusionSettings,
        tokens: np.ndarray,
        scores: np.ndarray,
        masked: np.ndarray,
        canvas: _Canvas,
        eos_ids: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray]:
        """The proposals' ranking scores and which of them may not be committed, per `settings.eos`."""
        is_eos = np.isin(tokens, eos_ids)
        if settings.eos == "last":
            return scores + np.where(is_eos, EOS_PENALTY, 0.0), np.zeros(len(tokens), dtype=bool)
        if settings.eos == "in_order":
            return scores, is_eos & (masked != canvas.first_mask())
        return scores, np.zeros(len(tokens), dtype=bool)

    @staticmethod
    def _choose(
        settings: DiffusionSettings,
        scores: np.ndarray,
        probabilities: np.ndarray,
        blocked: np.ndarray,
        masked: np.ndarray,
        step: int,
        budget: int,
        rng: np.random.Generator,
    ) -> np.ndarray:
        """Indices (into the masked positions of the window) to commit in this pass; `blocked` ones
        never (the first masked position is never blocked, so every pass commits something)."""
        scores = np.where(blocked, -np.inf, scores)  # blocked positions rank last
        chosen = DiffusionSampler._choose_unblocked(settings, scores, probabilities, masked, step, budget, rng)
        allowed = chosen[~blocked[chosen]]
        return allowed if len(allowed) else np.argsort(-scores, kind="stable")[:1]

    @staticmethod
    def _choose_unblocked(
        settings: DiffusionSettings,
        scores: np.ndarray,
        probabilities: np.ndarray,
        masked: np.ndarray,
        step: int,
        budget: int,
        rng: np.random.Generator,
    ) -> np.ndarray:
        n_masked = len(scores)
        ranked = np.argsort(-scores, kind="stable")
        if settings.threshold is not None:
            confident = np.flatnonzero(probabilities >= settings.threshold)
            return np.union1d(confident, ranked[:1])
        # Spacing chooses among ordinary proposals; blocked ones (-inf) and end-of-text held back by
        # eos="last" only ever fill what is left, as without spacing.
        ordinary = scores > EOS_PENALTY / 2
        if settings.schedule == "timestep":
            if settings.algorithm == "origin":
                chance = timestep_probability(step, budget, settings.eps)
                return np.flatnonzero(rng.random(n_masked) < chance)
            commits = timestep_commits(n_masked, step, budget, settings.eps)
            return spaced(ranked, masked, commits, settings.spacing, ordinary)
        # Block schedule: the window's masks spread evenly over the passes left in its budget.
        passes_left = max(1, budget - step)
        count = even_split(n_masked, passes_left)[0]
        if settings.algorithm == "origin":
            return np.sort(rng.choice(n_masked, size=count, replace=False))
        return spaced(ranked, masked, count, settings.spacing, ordinary)


def spaced(
    ranked: np.ndarray, positions: np.ndarray, count: int, spacing: int, ordinary: np.ndarray | None = None
) -> np.ndarray:
    """The first `count` of `ranked` (indices into `positions`, best first), passing over any within
    `spacing` positions of one already taken. What was passed over fills the count only when too few
    far-apart ones remain, and indices that are not `ordinary` (default: all are) come after both."""
    if spacing < 1 or count >= len(ranked):
        return ranked[:count]
    ordinary = np.ones(len(positions), dtype=bool) if ordinary is None else ordinary
    taken: list[int] = []
    skipped: list[int] = []
    for index in ranked[ordinary[ranked]]:
        if len(taken) == count:
            break
        near = any(abs(int(positions[index]) - int(positions[other])) <= spacing for other in taken)
        (skipped if near else taken).append(int(index))
    rest = [int(index) for index in ranked[~ordinary[ranked]]]
    taken.extend([*skipped, *rest][: count - len(taken)])
    return np.array(taken, dtype=np.int64)
