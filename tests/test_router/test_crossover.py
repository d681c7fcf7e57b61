"""`calibrate --show`'s crossover as a writer reads it: stretches where one engine wins throughout, and the
saw-tooth of block boundaries named once rather than listed flip by flip."""

from __future__ import annotations

from dataclasses import replace

from router.cost import diffusion_faster
from router.crossover import Stretch, sentence, stretches, turning_points
from router.policy import diffusion_plan
from router.profile import ArCosts, CostProfile, DiffusionCosts
from router.request import DiffusionPlan, Request

BLOCK = 8


def block_cache_ranges() -> list[tuple[int, int]]:
    """The router's own comparison for costs whose crossing falls where diffusion's estimate saw-tooths:
    blocks of 8 under the block cache, K = N/4 (AR 20 ms a token; a pass 30 ms + 4 ms a position)."""
    profile = CostProfile(
        calibrated=True,
        ar=ArCosts("ar-model", 2000.0, 0.020),
        diffusion=DiffusionCosts("draft-model", 0.030, 0.004, cache="block"),
    )
    request, base = Request("draft", 1), DiffusionPlan(32, BLOCK, None, "blocks")
    return diffusion_faster(profile, lambda n: diffusion_plan(replace(request, output_tokens=n), base), 30, 32, 4096)


def test_a_saw_tooth_crossing_reads_as_three_stretches_in_one_sentence() -> None:
    ranges = block_cache_ranges()
    assert len(ranges) > 20, "the estimates flip back and forth near the crossing"
    parts = stretches(ranges, 30, 4096, BLOCK)
    assert [part.faster for part in parts] == ["ar", None, "diffusion"]
    assert parts[0].lo == 30 and parts[-1].hi == 4096
    assert parts[1].lo == ranges[0][0] and parts[2].lo == ranges[-1][0]
    said = sentence(parts, BLOCK)
    assert said.startswith(f"AR is estimated faster up to {parts[0].hi} tokens; ")
    assert said.endswith(f"diffusion from {parts[2].lo} tokens on")
    assert said.count("alternate") == 1 and f"block of {BLOCK}" in said and said.count("faster") == 1
    assert [n for n, _ in turning_points(parts)] == [parts[1].lo, parts[2].lo]


def test_a_clean_crossing_and_none_at_all() -> None:
    assert sentence(stretches([(66, 4096)], 30, 4096, BLOCK), BLOCK) == (
        "AR is estimated faster up to 65 tokens; diffusion from 66 tokens on"
    )
    assert (
        sentence(stretches([], 30, 4096, BLOCK), BLOCK)
        == "AR is estimated faster at every length from 30 to 4096 tokens"
    )
    middle = stretches([(100, 900)], 30, 4096, BLOCK)
    assert middle == [Stretch(30, 99, "ar"), Stretch(100, 900, "diffusion"), Stretch(901, 4096, "ar")]
    assert sentence(middle, BLOCK) == (
        "AR is estimated faster up to 99 tokens; diffusion from 100 to 900 tokens; AR from 901 tokens on"
    )
