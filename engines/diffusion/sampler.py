"""The refinement loop: a canvas of masks between a prompt and an optional suffix, refined pass by pass.

Numpy only. Everything model-specific sits behind DiffusionBackend.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from engines.cancel import NEVER_CANCELLED, CancelToken
from engines.diffusion.backend import CacheMode, DiffusionBackend
from engines.diffusion.blank_lines import BlankLines
from engines.diffusion.block_samplers import authors_proposals, fast_dllm_v2_choice, sdar_choice, sub_block_at
from engines.diffusion.doubled_words import DoubledWords
from engines.diffusion.placement import BannedAt, place
from engines.diffusion.schedule import block_commits, even_split, timestep_commits, timestep_share
from engines.diffusion.scoring import Proposals, propose
from engines.diffusion.settings import DiffusionSettings, EosRule
from engines.events import MASKED_PIECE, DiffusionStats, Done, FinishReason, Pass
from engines.repeats import ban_repeats, repeats_at

UNCACHED_TIMESTEP = (
    "the timestep schedule refines the whole canvas to the end, so a cached prompt would never be brought up "
    "to date (39% of positions agreed with full passes on a test model); the blocks schedule uses the cache"
)
BLOCK_WITH_SUFFIX = (
    "block-causal attention sees nothing after the block being written, so a draft with text after it uses "
    "the {cache} cache"
)
SUFFIX_UNSEEN = (
    "the model was trained block-causally and reads nothing after the block being written: the text after "
    "the draft was not seen"
)


def cache_note(configured: CacheMode, used: CacheMode, has_suffix: bool, block_causal: bool) -> str:
    """What a draft's stats say about the cache it ran with, beside the timestep schedule's full passes."""
    if (used == "block" or block_causal) and has_suffix:
        return SUFFIX_UNSEEN
    if configured == "block" and used != "block" and has_suffix:
        return BLOCK_WITH_SUFFIX.format(cache=used)
    return ""


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
        self,
        index: int,
        committed: np.ndarray,
        confidences: np.ndarray,
        window: tuple[int, int],
        elapsed: float,
        planned: int | None,
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
            planned_passes=planned,
        )


class DiffusionSampler:
    def __init__(self, backend: DiffusionBackend) -> None:
        self.backend = backend
        self._pieces: list[str] | None = None  # the vocabulary's, read on first use by the rules below
        self._blank_lines: BlankLines | None = None  # its newline tokens
        self._doubled_words: DoubledWords | None = None  # its words

    def piece(self, token: int) -> str:
        """A token's text, from the vocabulary read once for the rules below."""
        if self._pieces is None:
            self._pieces = [self.backend.piece(t) for t in range(self.backend.vocab_size)]
        return self._pieces[token]

    def blank_lines(self, limit: int, *, canvas_ends_draft: bool) -> BlankLines | None:
        """The blank-lines rule at `limit` (None: off); `canvas_ends_draft`: no text follows the canvas."""
        if limit < 1:
            return None
        if self._blank_lines is None:
            backend = self.backend
            self._blank_lines = BlankLines(
                self.piece, backend.vocab_size, backend.mask_token_id, limit, frozenset(backend.eos_token_ids)
            )
        self._blank_lines.limit = limit
        self._blank_lines.canvas_ends_draft = canvas_ends_draft
        return self._blank_lines

    def doubled_words(self) -> DoubledWords:
        """The doubled-word rule for this backend's vocabulary."""
        if self._doubled_words is None:
            self._doubled_words = DoubledWords(self.piece, self.backend.vocab_size)
        return self._doubled_words

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
        configured = self.backend.cache_mode
        used = self.backend.reset(cache=cache, block_length=settings.block_length, suffix=len(suffix) > 0)
        uncached_because = "" if cache or configured == "none" else UNCACHED_TIMESTEP
        start = time.perf_counter()
        backend_s = waited_s = 0.0
        passes = 0
        skipped: list[int] = []
        finish: FinishReason = "length"

        # Block-causal attention counts its blocks from the sequence's start: the model's own, whatever the
        # cache (a full re-decode runs the same mask), and the block cache's for any model.
        block_causal = self.backend.block_causal
        align = canvas.offset if used == "block" or block_causal else 0
        # Sharpen's own rule, as eos and spacing are: the authors' loops run as published.
        blank_lines = self.blank_lines(
            settings.blank_lines if settings.sampler == "sharpen" else 0, canvas_ends_draft=not len(suffix)
        )
        doubled = self.doubled_words() if settings.no_doubled_words and settings.sampler == "sharpen" else None
        if doubled is not None:
            doubled.edges = (int(prompt[-1]) if len(prompt) else -1, int(suffix[0]) if len(suffix) else -1)
        placing: list[BannedAt] = [] if doubled is None else [doubled.banned]
        if settings.no_repeat_ngram and settings.sampler == "sharpen":
            placing.append(repeats_at(canvas.mask, settings.no_repeat_ngram))
        windows = list(self._windows(settings, length, align))
        for number, window in enumerate(windows):
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
                waited_s += self.backend.foreground.wait()  # a completion (ghost text) runs first; at most a second
                first_mask = canvas.first_mask()
                step = _plan(settings, canvas, window, masked, align)
                before = time.perf_counter()
                logits = self.backend.logits(
                    canvas.sequence,
                    canvas.offset + step.ask[0],
                    canvas.offset + step.ask[1],
                    canvas.offset + first_mask,
                )
                backend_s += time.perf_counter() - before
                rows = logits[step.masked - step.ask[0]]
                # A committed mask token would leave its position masked for ever: never propose it.
                rows[:, canvas.mask] = -np.inf
                if settings.no_repeat_ngram:
                    settled = canvas.tokens != canvas.mask
                    ban_repeats(rows, canvas.tokens, settled, step.masked, settings.no_repeat_ngram)
                if doubled is not None:
                    doubled.ban(rows, canvas.tokens, step.masked)
                if blank_lines is not None:
                    blank_lines.ban(rows, canvas.tokens, step.masked)
                if settings.sampler == "sharpen":
                    proposals = propose(
                        rows,
                        algorithm=settings.algorithm,
                        temperature=settings.temperature,
                        top_k=settings.top_k,
                        top_p=settings.top_p,
                        rng=rng,
                    )
                    tier = tiers(settings.eos, np.isin(proposals.tokens, eos_ids), step.masked == first_mask)
                    ranking = Ranking.of(proposals, tier, step.masked)
                    chosen = _choose(settings, ranking, window, rng)
                    tokens, probabilities = proposals.tokens[chosen], proposals.probabilities[chosen]
                    if placing:
                        tokens, probabilities = place(
                            rows,
                            chosen,
                            canvas.tokens,
                            step.masked[chosen],
                            tokens,
                            probabilities,
                            proposals.scores[chosen],
                            placing,
                            never=eos_ids,
                        )
                    if blank_lines is not None:
                        kept = blank_lines.kept(canvas.tokens, step.masked[chosen], tokens, proposals.scores[chosen])
                        chosen, tokens, probabilities = chosen[kept], tokens[kept], probabilities[kept]
                else:
                    chosen, tokens, probabilities = _authors_choice(settings, rows, window, step.first_token, rng)
                positions = step.masked[chosen]
                canvas.tokens[positions] = tokens
                canvas.confidence[positions] = probabilities
                passes += 1
                window.step += 1
                if settings.stop_at_eos and _stops(settings, canvas, window):
                    finish = "eos"
                planned = _planned_passes(settings, canvas, windows[number:], passes)
                yield canvas.snapshot(
                    passes - 1, positions, probabilities, step.window, time.perf_counter() - start, planned
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
                cache_note=cache_note(configured, used, len(suffix) > 0, block_causal),
                cache=used,
            ),
        )

    @staticmethod
    def _windows(settings: DiffusionSettings, length: int, offset: int = 0) -> Iterator[_Window]:
        """The canvas windows refined in turn, each with its pass budget (earlier blocks take the remainder).
        Blocks are aligned at canvas position 0, or (block-causal) at multiples of the block length counted
        from the sequence's start, so the first one shares its block with the prompt's last tokens."""
        if settings.schedule == "timestep":
            yield _Window(0, length, settings.steps)
            return
        bounds = block_bounds(length, settings.block_length, offset)
        if settings.sampler == "sdar":
            # SDAR's denoising_steps are per block, the partial first block's as much as any other's.
            budgets = [max(1, settings.steps // len(bounds))] * len(bounds)
        elif settings.threshold is not None or settings.sampler == "fast_dllm_v2":
            budgets = [0] * len(bounds)
        elif offset % settings.block_length == 0:
            budgets = even_split(settings.steps, len(bounds))  # LLaDA's: an equal share per block
        else:
            # The first block is the prompt's partly: the passes follow each block's share of the canvas.
            budgets = apportion(settings.steps, [hi - lo for lo, hi in bounds])
        for (lo, hi), budget in zip(bounds, budgets, strict=True):
            yield _Window(lo, hi, budget)


def _planned_passes(settings: DiffusionSettings, canvas: _Canvas, windows: list[_Window], passes: int) -> int | None:
    """The passes the draft takes as it stands after `passes` of them: the windows left (the current one first)
    still take their schedule's, and more where the end-of-text rule held masks back. None where the text
    decides: a threshold, Dream's random "origin" rule."""
    if settings.threshold is not None or (settings.schedule == "timestep" and settings.algorithm == "origin"):
        return None
    return passes + sum(
        window.passes_left(settings, len(canvas.masked_positions(window.lo, window.hi))) for window in windows
    )


def apportion(total: int, sizes: list[int]) -> list[int]:
    """`total` split in proportion to `sizes` (largest remainders first), at least 1 each."""
    whole = sum(sizes)
    shares = [total * size / whole for size in sizes]
    counts = [max(1, int(share)) for share in shares]
    by_remainder = sorted(range(len(sizes)), key=lambda i: int(shares[i]) - shares[i])
    for index in by_remainder[: max(0, total - sum(counts))]:
        counts[index] += 1
    return counts


def block_bounds(length: int, block_length: int, offset: int = 0) -> list[tuple[int, int]]:
    """The canvas's blocks [lo, hi) in canvas positions, cut at multiples of `block_length` from `offset`
    positions before the canvas (0: the canvas's own start)."""
    cuts = range(block_length - offset % block_length, length, block_length)
    edges = [0, *cuts, length]
    return list(itertools.pairwise(edges))


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

    def passes_left(self, settings: DiffusionSettings, masked_now: int) -> int:
        """The passes this window still takes for its `masked_now` masks if it commits what its schedule
        says: a step past the budget commits all that is left."""
        if settings.sampler == "fast_dllm_v2":
            return masked_now  # without a threshold, one position a pass
        if settings.sampler == "sharpen" and settings.schedule == "blocks":
            return min(masked_now, max(1, self.budget - self.step))  # the masks spread over the passes left
        sdar_counts = even_split(settings.block_length, self.budget) if settings.sampler == "sdar" else []
        masked, step, passes = masked_now, self.step, 0
        while masked:
            if settings.sampler == "sdar":
                count = max(1, sdar_counts[step] if step < len(sdar_counts) else masked)
            else:
                count = timestep_commits(masked, step, self.budget, settings.eps)
            masked -= min(count, masked)
            passes += count > 0
            step += 1
        return passes

    def commits_nothing(self, settings: DiffusionSettings, masked_now: int, rng: np.random.Generator) -> bool:
        """Whether this step is known, before the forward pass, to commit nothing (Dream's schedule only: the
        blocks schedule commits at least one a pass, and a threshold decides after it)."""
        if settings.schedule != "timestep" or settings.threshold is not None:
            return False
        if settings.algorithm == "origin":
            self.coins = np.flatnonzero(rng.random(masked_now) < timestep_share(self.step, self.budget, settings.eps))
            return not len(self.coins)
        return self.commits(settings, masked_now) == 0


@dataclass(frozen=True)
class _Step:
    """One pass: the canvas positions whose logits it asks for, the masked positions it may commit, and
    the window it reports (where it could commit)."""

    ask: tuple[int, int]
    masked: np.ndarray
    window: tuple[int, int]
    # fast_dllm_v2: a block's first position, committed from the previous block's clean pass.
    first_token: bool = False


def _plan(settings: DiffusionSettings, canvas: _Canvas, window: _Window, masked: np.ndarray, align: int) -> _Step:
    """What this pass asks for and may commit. Fast-dLLM v2 runs its whole block every pass but commits
    only into the first sub-block that has masks left; a block whose first position is masked gets that
    position first, alone, from the previous block's last row (its shifted logits' row for it): v2 takes
    the argmax of the clean pass that stores the finished block, with no pass of its own. Here the backend
    is asked for that one position: under the block cache that call is the finished block's clean pass
    (plus a one-position forward whose rows are not used), and it is reported as one pass."""
    whole = (window.lo, window.hi)
    if settings.sampler != "fast_dllm_v2":
        return _Step(whole, masked, whole)
    block_start = window.lo - (align + window.lo) % settings.block_length
    starts_block = block_start == window.lo and window.step == 0 and canvas.offset + window.lo > 0
    if starts_block and masked[0] == window.lo:
        first = (window.lo, window.lo + 1)
        return _Step(first, masked[:1], first, first_token=True)
    sub_lo, sub_hi = sub_block_at(int(masked[0]), block_start, settings.sub_block, whole)
    return _Step(whole, masked[masked < sub_hi], (sub_lo, sub_hi))


def _authors_choice(
    settings: DiffusionSettings, rows: np.ndarray, window: _Window, first_token: bool, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """SDAR's or Fast-dLLM v2's pass (engines/diffusion/block_samplers.py): which of `rows` commit, with
    what tokens and probabilities."""
    if first_token:  # Fast-dLLM v2's argmax of the previous block's last row, whatever the temperature
        tokens, probabilities = authors_proposals(rows, temperature=0.0, top_k=0, top_p=1.0, rng=rng)
        return np.zeros(1, dtype=np.int64), tokens, probabilities
    tokens, probabilities = authors_proposals(
        rows, temperature=settings.temperature, top_k=settings.top_k, top_p=settings.top_p, rng=rng
    )
    if settings.sampler == "sdar":
        counts = even_split(settings.block_length, window.budget)  # SDAR's get_num_transfer_tokens
        count = counts[window.step] if window.step < len(counts) else len(rows)
        chosen = sdar_choice(probabilities, count, settings.threshold)
    else:
        chosen = fast_dllm_v2_choice(probabilities, settings.threshold)
    return chosen, tokens[chosen], probabilities[chosen]


def _stops(settings: DiffusionSettings, canvas: _Canvas, window: _Window) -> bool:
    """Whether the draft ends here: end-of-text settled with no mask before it; under SDAR's sampler, once
    a block is complete and end-of-text is anywhere in the canvas up to its end."""
    if settings.sampler == "sdar":
        complete = not len(canvas.masked_positions(window.lo, window.hi))
        return complete and canvas.first_eos(window.hi) is not None
    return canvas.first_eos(canvas.first_mask()) is not None


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
