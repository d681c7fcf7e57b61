"""Which engine is estimated faster for which draft lengths, as a writer reads it.

The router compares the engines length by length (router/cost.py diffusion_faster). Near a crossing the
winner can flip back and forth: a diffusion draft pays one more pass where a new block opens, so its estimate
rises in steps at the block boundaries (a saw-tooth) while AR's rises smoothly, and rounding K to whole
passes does the same in smaller steps. Listed flip by flip that read "AR faster from 17 tokens; diffusion
faster from 20 tokens; AR faster from 21 tokens; ..." (24 crossovers). Here the lengths are cut into
stretches where one engine wins throughout, and stretches where the two alternate, named once.
"""

from __future__ import annotations

from dataclasses import dataclass

from router.request import EngineName

# A run of lengths one engine wins is its own stretch when it lasts this many periods (block lengths) or
# reaches either end of the lengths described; shorter runs between flips are the saw-tooth.
STABLE_PERIODS = 2


@dataclass(frozen=True)
class Stretch:
    lo: int
    hi: int
    faster: EngineName | None  # None: the two alternate with the block boundaries


def _label(engine: EngineName) -> str:
    return "AR" if engine == "ar" else "diffusion"


def stretches(diffusion_faster: list[tuple[int, int]], shortest: int, longest: int, period: int) -> list[Stretch]:
    """The lengths from `shortest` to `longest` cut into stretches (`diffusion_faster`: the ranges at which
    diffusion is estimated faster, as router/cost.py gives them; `period`: the block length)."""
    runs: list[Stretch] = []
    at = shortest
    for lo, hi in diffusion_faster:
        if lo > at:
            runs.append(Stretch(at, lo - 1, "ar"))
        runs.append(Stretch(lo, hi, "diffusion"))
        at = hi + 1
    if at <= longest:
        runs.append(Stretch(at, longest, "ar"))
    merged: list[Stretch] = []
    for run in runs:
        stable = run.hi - run.lo + 1 >= STABLE_PERIODS * max(1, period) or run.lo == shortest or run.hi == longest
        faster = run.faster if stable else None
        if merged and merged[-1].faster is None and faster is None:
            merged[-1] = Stretch(merged[-1].lo, run.hi, None)
        else:
            merged.append(Stretch(run.lo, run.hi, faster))
    return merged


def sentence(parts: list[Stretch], period: int) -> str:
    """One sentence a writer reads: which engine is faster for which lengths, the saw-tooth named once."""
    only = parts[0] if len(parts) == 1 else None
    if only is not None and only.faster is not None:
        return f"{_label(only.faster)} is estimated faster at every length from {only.lo} to {only.hi} tokens"
    clauses: list[str] = []
    for index, part in enumerate(parts):
        if part.faster is None:
            clauses.append(
                f"from {part.lo} to {part.hi} tokens the two alternate, as a new block of {period} opening costs "
                "diffusion a pass (its estimate rises in steps at the block boundaries)"
                if period > 1
                else f"from {part.lo} to {part.hi} tokens the two alternate, as whole passes round the estimates"
            )
        elif index == 0:
            clauses.append(f"{_label(part.faster)} is estimated faster up to {part.hi} tokens")
        elif index == len(parts) - 1:
            clauses.append(f"{_label(part.faster)} from {part.lo} tokens on")
        else:
            clauses.append(f"{_label(part.faster)} from {part.lo} to {part.hi} tokens")
    return "; ".join(clauses)


def turning_points(parts: list[Stretch]) -> list[tuple[int, str]]:
    """The lengths where a stretch begins (after the first), with what begins there: for the plot's lines."""
    points = []
    for part in parts[1:]:
        what = f"{_label(part.faster)} faster from {part.lo} tokens" if part.faster else f"alternating from {part.lo}"
        points.append((part.lo, what))
    return points
