"""The cost model: seconds for an engine to produce N tokens, from a calibration profile.

AR: prompt evaluation + N x time per token, a token's time growing with the context before it. Diffusion:
K(N, settings) passes, each costing a fixed part plus a part per position decoded, and a pass against cached
keys and values a part per cached position it attends to. With a cache and blocks, each block's first pass decodes the
whole sequence; its later passes decode from the block to the end (prefix cache: the prompt and the
finished blocks stay cached) or the block alone (dual cache: what follows the block stays cached too), and
for a model with shifted logits the row before the block as well.
Without one, every pass decodes prompt + canvas + suffix. Block-causal attention ("block") decodes
each block alone, and each settled block once more, as rows riding along with the next block's first
pass, which write its final keys and values.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace

from engines.diffusion.schedule import timestep_passes
from engines.diffusion.settings import DiffusionSettings
from router.kernel_costs import TILE_ROWS, TILE_WINDOW, TILED_FROM
from router.profile import ArCosts, CostProfile, DiffusionCosts
from router.request import DiffusionPlan, EngineName, Estimate

DREAM_EPS = DiffusionSettings().eps
# The tokens a draft asked for n is expected to write, by engine (router/expected_lengths.py learns them).
ExpectedTokens = Callable[[EngineName, int], float]


def asked_length(_engine: EngineName, n: int) -> float:
    """Before any draft is known: a draft writes the length asked for."""
    return float(n)


def passes_for(n: int, plan: DiffusionPlan, costs: DiffusionCosts) -> int:
    n_blocks = math.ceil(n / plan.block_length) if plan.schedule == "blocks" else 1
    if plan.threshold is not None:
        return max(n_blocks, math.ceil(n * costs.threshold_passes_per_token))
    if plan.schedule == "timestep":
        return timestep_passes(n, plan.steps, DREAM_EPS)  # steps that commit nothing run no pass
    return max(n_blocks, plan.steps)


def pass_seconds(positions: float, costs: DiffusionCosts, context: float = 0.0) -> float:
    """A pass decoding `positions` rows against `context` cached ones."""
    per_context = costs.pass_s_per_context + costs.pass_s_per_row_context * positions
    line = costs.pass_base_s + costs.pass_s_per_position * positions + per_context * context
    return line + tiled_change(positions, costs)


def tiled_change(positions: float, costs: DiffusionCosts) -> float:
    """What the tiled kernels change in a pass over `positions` rows: from TILED_FROM rows on, the matrices they
    take cost each window's unpacking and whole tiles of rows instead of their part of the line."""
    if positions < TILED_FROM or costs.unpack_s <= 0:
        return 0.0
    windows, tiles = math.ceil(positions / TILE_WINDOW), math.ceil(positions / TILE_ROWS)
    tiled = windows * costs.unpack_s + tiles * TILE_ROWS * costs.tiled_s_per_tile_row
    return tiled - costs.tiled_base_s - costs.tiled_s_per_position * positions


def cached_pass_seconds(window: float, costs: DiffusionCosts, context: float) -> float:
    """A prefix or dual cache's pass over `window` rows against `context` cached positions: a model with shifted
    logits decodes the row before the window too, which is then not among the cached ones."""
    return pass_seconds(window + costs.shift_rows, costs, context - costs.shift_rows)


def sampled_rows(n: int, plan: DiffusionPlan) -> int:
    """The rows of logits the sampler reads in a pass: its window's (a block, or the whole canvas)."""
    return min(plan.block_length, n) if plan.schedule == "blocks" else n


def sampler_seconds(passes: int, n: int, plan: DiffusionPlan, costs: DiffusionCosts) -> float:
    return passes * sampled_rows(n, plan) * costs.sampler_s_per_row


def estimate_ar(n: int, prompt_tokens: int, costs: ArCosts) -> Estimate:
    """The prompt, then n tokens, the i-th attending to the prompt and the i tokens before it."""
    prompt_s = prompt_tokens / costs.prompt_tokens_per_s if costs.prompt_tokens_per_s > 0 else 0.0
    mean_context = prompt_tokens + (n - 1) / 2 if n > 0 else prompt_tokens
    per_token = costs.token_seconds(mean_context)
    return Estimate(
        "ar", prompt_s + n * per_token, f"{prompt_tokens} prompt tokens + {n} tokens x {per_token * 1000:.1f} ms"
    )


def estimate_diffusion(
    n: int, prompt_tokens: int, suffix_tokens: int, plan: DiffusionPlan, costs: DiffusionCosts
) -> Estimate:
    """A draft's passes, each over the positions its cache leaves to decode; on another machine, plus the round
    trip (a text-only server's drafts: their measured seconds per token, plus the round trip)."""
    if costs.text_only_s_per_token > 0:
        seconds = costs.round_trip_s + n * costs.text_only_s_per_token
        ms = costs.text_only_s_per_token * 1000
        detail = f"{n} tokens x {ms:.1f} ms as its drafts ran + {costs.round_trip_s * 1000:.0f} ms round trip"
        return Estimate("diffusion", seconds, detail)
    estimate = _estimate_passes(n, prompt_tokens, suffix_tokens, plan, costs)
    if costs.round_trip_s <= 0:
        return estimate
    detail = f"{estimate.detail} + {costs.round_trip_s * 1000:.0f} ms round trip"
    return replace(estimate, seconds=estimate.seconds + costs.round_trip_s, detail=detail)


def _estimate_passes(
    n: int, prompt_tokens: int, suffix_tokens: int, plan: DiffusionPlan, costs: DiffusionCosts
) -> Estimate:
    passes = passes_for(n, plan, costs)
    # Block-causal attention cannot see text after the draft: such a draft runs the dual cache instead.
    cache = "dual" if costs.cache == "block" and suffix_tokens else costs.cache
    if cache == "block" and plan.schedule == "blocks":
        return _estimate_block_causal(n, prompt_tokens, plan, costs, passes)
    if cache in ("prefix", "dual") and plan.schedule == "blocks":
        n_blocks = math.ceil(n / plan.block_length)
        # Block b's later passes decode the block alone (dual: a whole block's rows) or from its start to the
        # end (prefix). Under the prefix cache its share of the passes is taken as its share of the tokens
        # (a short last block is done in a pass or two).
        if cache == "dual":
            # A whole block's rows, even for a short last block: averaging by size made one more token
            # cheaper where it opened a block of one (its extra passes spread over fewer rows).
            window = float(min(plan.block_length, n))
        else:
            sizes = [min(plan.block_length, n - b * plan.block_length) for b in range(n_blocks)]
            window = suffix_tokens + sum(size * (n - b * plan.block_length) for b, size in enumerate(sizes)) / n
        # Each block's first pass decodes the whole sequence and fills the cache (Fast-dLLM); the others
        # attend to what it cached.
        full = n_blocks * pass_seconds(prompt_tokens + n + suffix_tokens, costs)
        cached = prompt_tokens + n + suffix_tokens - window
        seconds = full + max(0, passes - n_blocks) * cached_pass_seconds(window, costs, cached)
        how = f"{cache} cache"
    else:
        window = prompt_tokens + n + suffix_tokens
        seconds = passes * pass_seconds(window, costs)
        how = "every pass re-decodes the whole sequence"
    seconds += sampler_seconds(passes, n, plan, costs)
    ms = pass_seconds(window, costs) * 1000
    detail = f"{passes} passes x {ms:.0f} ms over ~{window:.0f} positions, {how}"
    return Estimate("diffusion", seconds, detail)


def _estimate_block_causal(
    n: int, prompt_tokens: int, plan: DiffusionPlan, costs: DiffusionCosts, passes: int
) -> Estimate:
    """Blocks aligned from the sequence's start: a refining pass decodes its block alone (the first holds
    the prompt's last tokens too), and nothing is ever decoded again. Every settled block is written once,
    by `block_length` clean rows: the block before a window rides along with the window's first pass (its
    rows without a pass's fixed cost); the prompt's other whole blocks have a pass each."""
    block = plan.block_length
    prompt_blocks = prompt_tokens // block
    windows = math.ceil((prompt_tokens + n) / block) - prompt_blocks
    # A pass commits at least one token, and every block takes one; each decodes a whole block (a short
    # last one too: slightly more than it costs, so a longer draft is never estimated cheaper).
    passes = max(windows, min(passes, n))
    rows = min(block, prompt_tokens % block + n)
    riding = windows - 1 + min(1, prompt_blocks)
    alone = max(0, prompt_blocks - 1)
    # The settled blocks a window's passes attend to, on average over the draft (the cost is linear in them).
    context = prompt_blocks * block + (windows - 1) * block / 2
    seconds = (
        alone * pass_seconds(block, costs, prompt_blocks * block / 2)
        + passes * pass_seconds(rows, costs, context)
        + riding * (pass_seconds(rows + block, costs, context) - pass_seconds(rows, costs, context))
        + sampler_seconds(passes, n, plan, costs)
    )
    ms = pass_seconds(rows, costs) * 1000
    detail = (
        f"{passes} passes x {ms:.0f} ms over ~{rows:.0f} positions, {riding} of them with a settled block of "
        f"{block} riding along, + {alone} clean passes; block-causal cache"
    )
    return Estimate("diffusion", seconds, detail)


def written_length(engine: EngineName, n: int, expected: ExpectedTokens) -> int:
    return max(1, min(n, round(expected(engine, n))))


def _for_written(estimate_for: Callable[[int], Estimate], written: int, n: int) -> Estimate:
    asked = estimate_for(n)
    if written >= n:
        return asked
    estimate = estimate_for(written)
    detail = f"~{written} of {n} tokens, as its last drafts ran; {estimate.detail}"
    return replace(estimate, detail=detail, expected_tokens=written, asked_seconds=asked.seconds)


def draft_estimates(
    n: int,
    prompt_tokens: int,
    suffix_tokens: int,
    plan_for: Callable[[int], DiffusionPlan],
    profile: CostProfile,
    expected: ExpectedTokens = asked_length,
) -> tuple[Estimate, Estimate]:
    """AR's and diffusion's estimates for a draft asked for `n` tokens: each for the length that engine's
    drafts are expected to write (`expected`), diffusion's with `plan_for` that length (the configured
    settings, K scaled), and for `n` itself, which the router compares (Estimate.seconds_as_asked).
    A diffusion draft costs less for ending early only where it decodes block by block with nothing but
    the blocks before it in view (the block-causal cache); otherwise its passes decode the whole canvas of
    `n`, and it is estimated for `n`."""
    ar_written = written_length("ar", n, expected)
    stops_early = plan_for(n).schedule == "blocks" and profile.diffusion.cache == "block" and not suffix_tokens
    diffusion_written = written_length("diffusion", n, expected) if stops_early else n

    def ar_for(tokens: int) -> Estimate:
        return estimate_ar(tokens, prompt_tokens, profile.ar)

    def diffusion_for(tokens: int) -> Estimate:
        return estimate_diffusion(tokens, prompt_tokens, suffix_tokens, plan_for(tokens), profile.diffusion)

    return (
        _for_written(ar_for, ar_written, n),
        _for_written(diffusion_for, diffusion_written, n),
    )


def diffusion_faster(
    profile: CostProfile,
    plan_for: Callable[[int], DiffusionPlan],
    shortest: int,
    prompt_tokens: int = 32,
    longest: int = 4096,
) -> list[tuple[int, int]]:
    """The output lengths from `shortest` to `longest` at which diffusion is estimated faster than AR, as
    ranges [first, last] (the estimates the router compares: it may win only between two lengths)."""
    ranges: list[tuple[int, int]] = []
    for n in range(shortest, longest + 1):
        ar, diffusion = draft_estimates(n, prompt_tokens, 0, plan_for, profile)
        faster = diffusion.seconds_as_asked < ar.seconds_as_asked
        if faster and ranges and ranges[-1][1] == n - 1:
            ranges[-1] = (ranges[-1][0], n)
        elif faster:
            ranges.append((n, n))
    return ranges
