"""How many masked positions each pass commits: LLaDA's even split and Dream's timestep schedule."""

from __future__ import annotations


def even_split(masked: int, steps: int) -> list[int]:
    """LLaDA's get_num_transfer_tokens: `masked` commits over `steps` passes, the remainder first."""
    base, extra = divmod(masked, steps)
    return [base + (1 if i < extra else 0) for i in range(steps)]


def steps_per_block(total_steps: int, n_blocks: int) -> list[int]:
    """Share K passes among the blocks as evenly as possible (earlier blocks take the remainder)."""
    return even_split(total_steps, n_blocks)


def timestep_commits(masked_now: int, step: int, steps: int, eps: float) -> int:
    """Dream's schedule: t runs from 1 to eps in `steps` steps; a step unmasks the share 1 - s/t."""
    if step >= steps - 1:
        return masked_now
    t = 1 - step * (1 - eps) / steps
    s = 1 - (step + 1) * (1 - eps) / steps
    return int(masked_now * (1 - s / t))


def timestep_probability(step: int, steps: int, eps: float) -> float:
    """Dream's "origin" algorithm: the chance that each masked position is unmasked at this step."""
    if step >= steps - 1:
        return 1.0
    t = 1 - step * (1 - eps) / steps
    s = 1 - (step + 1) * (1 - eps) / steps
    return 1 - s / t
