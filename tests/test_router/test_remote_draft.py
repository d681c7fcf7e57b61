"""What a draft on another machine costs from here: the remote's own calibration plus the round trip, or for a
text-only server the seconds per token its drafts took."""

from __future__ import annotations

from dataclasses import asdict

import pytest

from router.cost import estimate_diffusion
from router.profile import DiffusionCosts
from router.remote_draft import TEXT_ONLY_GUESS_S_PER_TOKEN, remote_costs
from router.request import DiffusionPlan

PLAN = DiffusionPlan(steps=16, block_length=32)


def test_a_remote_sharpen_is_estimated_with_its_costs_plus_the_round_trip() -> None:
    theirs = DiffusionCosts(model="sdar", pass_base_s=0.02, pass_s_per_position=0.0001, cache="dual")
    costs = remote_costs(asdict(theirs), 0.25, None)
    here = estimate_diffusion(64, 32, 0, PLAN, costs)
    there = estimate_diffusion(64, 32, 0, PLAN, theirs)
    assert here.seconds == pytest.approx(there.seconds + 0.25)
    assert here.detail == f"{there.detail} + 250 ms round trip"


def test_a_remote_that_drafts_on_another_adds_both_round_trips() -> None:
    reported = asdict(DiffusionCosts(round_trip_s=0.1)) | {"unknown": 1, "pass_base_s": -3}
    costs = remote_costs(reported, 0.05, None)
    assert costs.round_trip_s == pytest.approx(0.15) and costs.pass_base_s == DiffusionCosts().pass_base_s


def test_a_text_only_server_is_estimated_per_token_as_its_drafts_ran() -> None:
    guessed = remote_costs(None, 0.1, None)
    assert not guessed.measured and guessed.text_only_s_per_token == TEXT_ONLY_GUESS_S_PER_TOKEN
    learnt = remote_costs(None, 0.1, 0.02)
    estimate = estimate_diffusion(100, 32, 0, PLAN, learnt)
    assert learnt.measured and estimate.seconds == pytest.approx(0.1 + 100 * 0.02)
    assert estimate.detail == "100 tokens x 20.0 ms as its drafts ran + 100 ms round trip"
