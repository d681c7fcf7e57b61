"""The refinement loop: a canvas of masks between a prompt and an optional suffix, refined pass by pass.

Numpy only. Everything model-specific sits behind DiffusionBackend.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from engines.cancel import NEVER_CANCELLED, CancelToken
from engines.diffusion.backend import DiffusionBackend
from engines.diffusion.schedule import block_commits, even_split, timestep_commits, timestep_share
from engines.diffusion.scoring import Proposals, propose
from engines.diffusion.settings import DiffusionSettings, EosRule
from engines.events import MASKED_PIECE, DiffusionStats, Done, FinishReason, Pass
from engines.threads import FOREGROUND

UNCACHED_TIMESTEP = (
    "the timestep schedule refines the whole canvas to the end, so a cached prompt would never be brought up "
    "to date (39% of positions agreed with full passes on a test model); the blocks schedule uses the cache"
)


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
        # A cache is brought up to date where a block starts; Dream's schedule has no such point.
        cache = settings.schedule == "blocks"
        self.backend.reset(cache=cache)
        uncached_because = "" if cache or self.backend.cache_mode == "none" else UNCACHED_TIMESTEP
        start = time.perf_counter()
        backend_s = waited_s = 0.0
        passes = 0
        skipped: list[int] = []
        finish: FinishReason = "length"

        for window in self._windows(settings, length):
            while len(masked := canvas.masked_positions(window.lo, window.hi)):
                if cancel.cancelled:
                    finish = "cancelled"
                    break
                if window.commits_nothing(settings, len(masked), rng):
                    # Dream's schedule rounds this step's share down to no position (or, under "origin",
                    # no position's coin came up): the canvas stays as it was, so no forward pass.
                    skipped.append(window.step)
                    window.step += 1
                    continue
                waited_s += FOREGROUND.wait()  # a completion (ghost text) runs first; at most a second
                first_mask = canvas.first_mask()
                before = time.perf_counter()
                logits = self.backend.logits(
                    canvas.sequence, canvas.offset + window.lo, canvas.offset + window.hi, canvas.offset + first_mask
                )
                backend_s += time.perf_counter() - before
                rows = logits[masked - window.lo]
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
                tier = tiers(settings.eos, np.isin(proposals.tokens, eos_ids), masked == first_mask)
                ranking = Ranking.of(proposals, tier, masked)
                chosen = _choose(settings, ranking, window, rng)
                positions = masked[chosen]
                canvas.tokens[positions] = proposals.tokens[chosen]
                canvas.confidence[positions] = proposals.probabilities[chosen]
                passes += 1
                window.step += 1
                if settings.stop_at_eos and canvas.first_eos(canvas.first_mask()) is not None:
                    finish = "eos"
                yield canvas.snapshot(
                    passes - 1,
                    positions,
                    proposals.probabilities[chosen],
                    (window.lo, window.hi),
                    time.perf_counter() - start,
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
            stats=DiffusionStats(
                prompt_tokens=canvas.offset,
                canvas_tokens=length,
                generated_tokens=len(text_tokens),
                passes=passes,
                total_s=time.perf_counter() - start,
                backend_s=backend_s,
                finish_reason=finish,
                waited_s=waited_s,
                skipped_steps=tuple(skipped),
                uncached_because=uncached_because,
                cache=self.backend.cache_mode if cache else "none",
            ),
        )

    @staticmethod
    def _windows(settings: DiffusionSettings, length: int) -> Iterator[_Window]:
        """The canvas windows refined in turn, each with its pass budget (earlier blocks take the remainder)."""
        if settings.schedule == "timestep":
            yield _Window(0, length, settings.steps)
            return
        n_blocks = settings.n_blocks(length)
        budgets = even_split(settings.steps, n_blocks) if settings.threshold is None else [0] * n_blocks
        for block, budget in enumerate(budgets):
            lo = block * settings.block_length
            yield _Window(lo, min(length, lo + settings.block_length), budget)


# A proposal's tier: a pass ranks its proposals by tier, then by score. Held back ones only fill what
# ordinary ones leave; blocked ones are never committed.
ORDINARY, HELD_BACK, BLOCKED = 0, 1, 2


def tiers(eos: EosRule, is_eos: np.ndarray, at_first_mask: np.ndarray) -> np.ndarray:
    """Each proposal's tier under the end-of-text rule (see DiffusionSettings.eos)."""
    if eos == "last":
        return np.where(is_eos, HELD_BACK, ORDINARY)
    if eos == "in_order":
        return np.where(is_eos & ~at_first_mask, BLOCKED, ORDINARY)
    return np.full(len(is_eos), ORDINARY)


@dataclass(frozen=True)
class Ranking:
    """A pass's proposals, one per masked position of the window, and the order they commit in."""

    order: np.ndarray  # indices into the proposals, best first: by tier, then score; ties leftmost first
    tier: np.ndarray
    probability: np.ndarray  # of the proposed token
    position: np.ndarray  # on the canvas

    @staticmethod
    def of(proposals: Proposals, tier: np.ndarray, position: np.ndarray) -> Ranking:
        order = np.lexsort((-proposals.scores, tier))
        return Ranking(order, tier, proposals.probabilities, position)

    def top(self, count: int, spacing: int) -> np.ndarray:
        return spaced(self.order, self.position, count, spacing, self.tier == ORDINARY)

    def allowed(self, chosen: np.ndarray) -> np.ndarray:
        """`chosen` less the blocked, or else the top-ranked: never blocked, as the canvas's first mask
        is in the window, so every pass commits something."""
        allowed = chosen[self.tier[chosen] != BLOCKED]
        return allowed if len(allowed) else self.order[:1]


@dataclass
class _Window:
    """The canvas positions [lo, hi), refined until none of them is masked."""

    lo: int
    hi: int
    budget: int  # its passes (ignored under a threshold)
    step: int = 0  # steps of its schedule taken so far
    # Under Dream's "origin": which masked positions this step's coins chose (drawn before the pass).
    coins: np.ndarray | None = None

    def commits(self, settings: DiffusionSettings, masked_now: int) -> int:
        if settings.schedule == "timestep":
            return timestep_commits(masked_now, self.step, self.budget, settings.eps)
        return block_commits(masked_now, self.step, self.budget)

    def commits_nothing(self, settings: DiffusionSettings, masked_now: int, rng: np.random.Generator) -> bool:
        """Whether this step is known, before the forward pass, to commit nothing (Dream's schedule only: the
        blocks schedule commits at least one a pass, and a threshold decides after it)."""
        if settings.schedule != "timestep" or settings.threshold is not None:
            return False
        if settings.algorithm == "origin":
            self.coins = np.flatnonzero(rng.random(masked_now) < timestep_share(self.step, self.budget, settings.eps))
            return not len(self.coins)
        return self.commits(settings, masked_now) == 0


def _choose(settings: DiffusionSettings, ranking: Ranking, window: _Window, rng: np.random.Generator) -> np.ndarray:
    """Indices into the window's masked positions to commit in this pass."""
    n = len(ranking.order)
    if settings.threshold is not None:
        chosen = np.union1d(np.flatnonzero(ranking.probability >= settings.threshold), ranking.order[:1])
    elif settings.algorithm != "origin":
        chosen = ranking.top(window.commits(settings, n), settings.spacing)
    elif settings.schedule == "timestep":
        assert window.coins is not None, "drawn before the pass (commits_nothing)"
        chosen = window.coins
    else:
        chosen = np.sort(rng.choice(n, size=window.commits(settings, n), replace=False))
    return ranking.allowed(chosen)


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
