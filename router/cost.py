"""The cost model: seconds for an engine to produce N tokens, from a calibration profile.

AR: prompt evaluation + N x time per token. Diffusion: K(N, settings) passes, each costing a fixed
part plus a part per position decoded. With a cache and blocks, each block's first pass decodes the
whole sequence; its later passes decode from the block to the end (prefix cache: the prompt and the
finished blocks stay cached) or the block alone (dual cache: what follows the block stays cached too).
Without one, every pass decodes prompt + canvas + suffix.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from engines.diffusion.schedule import timestep_passes
from engines.diffusion.settings import DiffusionSettings
from router.profile import ArCosts, CostProfile, DiffusionCosts
from router.request import Estimate

DREAM_EPS = DiffusionSettings().eps


@dataclass(frozen=True)
class DiffusionPlan:
    """The diffusion settings the cost depends on."""

    steps: int
    block_length: int
    threshold: float | None = None
    schedule: str = "blocks"


def passes_for(n: int, plan: DiffusionPlan, costs: DiffusionCosts) -> int:
    n_blocks = math.ceil(n / plan.block_length) if plan.schedule == "blocks" else 1
    if plan.threshold is not None:
        return max(n_blocks, math.ceil(n * costs.threshold_passes_per_token))
    if plan.schedule == "timestep":
        return timestep_passes(n, plan.steps, DREAM_EPS)  # steps that commit nothing run no pass
    return max(n_blocks, plan.steps)


def pass_seconds(positions: float, costs: DiffusionCosts) -> float:
    return costs.pass_base_s + costs.pass_s_per_position * positions


def estimate_ar(n: int, prompt_tokens: int, costs: ArCosts) -> Estimate:
    prompt_s = prompt_tokens / costs.prompt_tokens_per_s if costs.prompt_tokens_per_s > 0 else 0.0
    seconds = prompt_s + n * costs.seconds_per_token
    return Estimate(
        "ar", seconds, f"{prompt_tokens} prompt tokens + {n} tokens x {costs.seconds_per_token * 1000:.1f} ms"
    )


def estimate_diffusion(
    n: int, prompt_tokens: int, suffix_tokens: int, plan: DiffusionPlan, costs: DiffusionCosts
) -> Estimate:
    passes = passes_for(n, plan, costs)
    if costs.cache in ("prefix", "dual") and plan.schedule == "blocks":
        n_blocks = math.ceil(n / plan.block_length)
        # Block b's later passes decode the block alone (dual) or from its start to the end (prefix). Its
        # share of the passes is taken as its share of the tokens (a short last block is done in a pass or
        # two), which also keeps the estimate from dropping when one more token opens a new block.
        sizes = [min(plan.block_length, n - b * plan.block_length) for b in range(n_blocks)]
        if costs.cache == "dual":
            window = sum(size * size for size in sizes) / n
        else:
            window = suffix_tokens + sum(size * (n - b * plan.block_length) for b, size in enumerate(sizes)) / n
        # Each block's first pass decodes the whole sequence and fills the cache (Fast-dLLM).
        full = n_blocks * pass_seconds(prompt_tokens + n + suffix_tokens, costs)
        seconds = full + max(0, passes - n_blocks) * pass_seconds(window, costs)
        how = f"{costs.cache} cache"
    else:
        window = prompt_tokens + n + suffix_tokens
        seconds = passes * pass_seconds(window, costs)
        how = "every pass re-decodes the whole sequence"
    ms = pass_seconds(window, costs) * 1000
    detail = f"{passes} passes x {ms:.0f} ms over ~{window:.0f} positions, {how}"
    return Estimate("diffusion", seconds, detail)


def crossover_tokens(
    profile: CostProfile, plan_for: Callable[[int], DiffusionPlan], prompt_tokens: int = 32, limit: int = 4096
) -> int | None:
    """The shortest output length at which diffusion is estimated faster than AR, if any up to `limit`."""
    for n in range(1, limit + 1):
        plan = plan_for(n)
        if (
            estimate_diffusion(n, prompt_tokens, 0, plan, profile.diffusion).seconds
            < estimate_ar(n, prompt_tokens, profile.ar).seconds
        ):
            return n
    return None
