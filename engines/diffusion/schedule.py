"""How many masked positions each pass commits: LLaDA's even split and Dream's timestep schedule."""

from __future__ import annotations

import functools

import numpy as np


def even_split(masked: int, steps: int) -> list[int]:
    """LLaDA's get_num_transfer_tokens: `masked` commits over `steps` passes, the remainder first."""
    base, extra = divmod(masked, steps)
    return [base + (1 if i < extra else 0) for i in range(steps)]


def block_commits(masked_now: int, step: int, steps: int) -> int:
    """LLaDA's block schedule: the masks left spread evenly over the passes left (at least one)."""
    return even_split(masked_now, max(1, steps - step))[0]


@functools.cache
def dream_timesteps(steps: int, eps: float) -> np.ndarray:
    """Dream's t for each step: torch.linspace(1, eps, steps + 1) in float32, as torch's scalar kernel
    computes it (the first half counted up from 1, the second down from eps). The float32 rounding is
    Dream's own: where m * (1 - s/t) lands on a whole number, it decides the count."""
    n = steps + 1
    start, end = np.float32(1.0), np.float32(eps)
    stride = (end - start) / np.float32(n - 1)
    index = np.arange(n)
    up = start + stride * index.astype(np.float32)
    down = end - stride * (n - 1 - index).astype(np.float32)
    timesteps = np.where(index < n // 2, up, down).astype(np.float32)
    timesteps.setflags(write=False)  # cached: shared by every caller
    return timesteps


def timestep_share(step: int, steps: int, eps: float) -> np.float32:
    """Dream's schedule: t runs from 1 to eps in `steps` steps; a step unmasks the share 1 - s/t of the
    masks (all of them at the last step). The "origin" algorithm takes it as each mask's chance."""
    if step >= steps - 1:
        return np.float32(1.0)
    t, s = dream_timesteps(steps, eps)[step : step + 2]
    return np.float32(1.0) - s / t


def timestep_passes(canvas: int, steps: int, eps: float) -> int:
    """Forward passes a Dream draft of `canvas` positions takes in `steps` steps: the steps that commit
    something (with nothing held back; end-of-text rules and thresholds change it)."""
    masked, passes = canvas, 0
    for step in range(steps):
        count = timestep_commits(masked, step, steps, eps)
        passes += count > 0
        masked -= count
    return passes


def timestep_commits(masked_now: int, step: int, steps: int, eps: float) -> int:
    """int(m * (1 - s/t)) in float32, as Dream counts; 0 at some steps (then nothing is committed)."""
    if step >= steps - 1:
        return masked_now
    return int(np.float32(masked_now) * timestep_share(step, steps, eps))
