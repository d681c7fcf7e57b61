"""How many masked positions each pass commits: LLaDA's even split and Dream's timestep schedule."""

from __future__ import annotations


def even_split(masked: int, steps: int) -> list[int]:
    """LLaDA's get_num_transfer_tokens: `masked` commits over `steps` passes, the remainder first."""
    base, extra = divmod(masked, steps)
    return [base + (1 if i < extra else 0) for i in range(steps)]


def block_commits(masked_now: int, step: int, steps: int) -> int:
    """LLaDA's block schedule: the masks left spread evenly over the passes left (at least one)."""
    return even_split(masked_now, max(1, steps - step))[0]


def timestep_share(step: int, steps: int, eps: float) -> float:
    """Dream's schedule: t runs from 1 to eps in `steps` steps; a step unmasks the share 1 - s/t of the
    masks (all of them at the last step). The "origin" algorithm takes it as each mask's chance."""
    if step >= steps - 1:
        return 1.0
    t, s = (1 - k * (1 - eps) / steps for k in (step, step + 1))
    return 1 - s / t


def timestep_commits(masked_now: int, step: int, steps: int, eps: float) -> int:
    return int(masked_now * timestep_share(step, steps, eps))
