"""How long each engine's drafts run (router/expected_lengths.py), and estimates for the length a draft will write."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from router.cost import DiffusionPlan, diffusion_faster, draft_estimates, estimate_ar
from router.expected_lengths import (
    KEPT_DRAFTS,
    MIN_DRAFTS,
    DraftLengths,
    LengthBook,
    WrittenDraft,
    load_lengths,
    mean_length,
    render_lengths,
)
from router.policy import decide
from router.profile import ArCosts, CostProfile, DiffusionCosts
from router.request import EngineName, Request

MODELS: dict[EngineName, str] = {"ar": "smollm2", "diffusion": "draft"}
PROFILE = CostProfile(
    ar=ArCosts(prompt_tokens_per_s=1000, seconds_per_token=0.02),
    diffusion=DiffusionCosts(pass_base_s=0.01, pass_s_per_position=0.002, cache="block"),
)
BLOCKS = DiffusionPlan(steps=64, block_length=8)


def lengths(*drafts: tuple[int, int, bool], model: str = "smollm2") -> DraftLengths:
    return DraftLengths(model, tuple(WrittenDraft(*d) for d in drafts))


def test_a_draft_of_n_is_expected_to_write_the_mean_of_what_the_drafts_before_would_have() -> None:
    known = lengths((256, 100, True), (256, 256, False), (128, 60, True), (256, 256, False), (256, 90, True))
    # Asked for 80: 80, 80, 60, 80, 80. Asked for 400: the drafts cut at 256 are taken to run on.
    assert known.expected(80) == pytest.approx(76)
    assert known.expected(400) == pytest.approx((100 + 400 + 60 + 400 + 90) / 5)
    assert lengths(*[(256, 256, False)] * MIN_DRAFTS).expected(256) == 256
    assert mean_length([WrittenDraft(256, 100, True)] * 2 + [WrittenDraft(256, 256, False)] * 2, 256) == 178


def test_drafts_cut_short_say_nothing_beyond_their_limit() -> None:
    # Twenty 128-token drafts, 14 of them cut at 128: a draft of 256 may well run past 128.
    short = lengths(*[(128, 100, True)] * 6, *[(128, 128, False)] * 14)
    assert short.expected(256) == pytest.approx((6 * 100 + 14 * 256) / 20)
    # Then three drafts asked for 256 ended by themselves at 150, 180 and 200: past 128 they are all that is
    # known, and every one of them ended by 200.
    learnt = short
    for written in (150, 180, 200):
        learnt = learnt.with_draft(WrittenDraft(256, written, True))
    running_at_128 = 17 / 23
    restricted = 100 + running_at_128 * (28 + 22 + 30 * 2 / 3 + 20 / 3)
    assert learnt.expected(256) == pytest.approx(restricted)
    # Counting each cut draft as running to 256 would have said 205: the 128-token limits are not lengths.
    assert learnt.expected(256) < (600 + 14 * 256 + 150 + 180 + 200) / 23 - 40


def test_too_few_drafts_assume_the_length_asked_and_only_the_last_ones_count() -> None:
    few = lengths(*[(256, 10, True)] * (MIN_DRAFTS - 1))
    assert few.expected(256) == 256
    many = few
    for _ in range(KEPT_DRAFTS):
        many = many.with_draft(WrittenDraft(256, 200, True))
    assert len(many.drafts) == KEPT_DRAFTS and many.expected(256) == 200, "the early short drafts are forgotten"


def test_a_book_knows_each_engine_kind_and_model_apart() -> None:
    book = LengthBook()
    for _ in range(MIN_DRAFTS):
        book = book.recorded("ar", "draft", "smollm2", WrittenDraft(256, 100, True))
    expected = book.expected_tokens("draft", MODELS)
    assert expected("ar", 256) == 100
    assert book.expected_tokens("infill", MODELS)("ar", 256) == 256, "rewrites are another kind"
    assert book.expected_tokens("draft", {"ar": "another-model"})("ar", 256) == 256, "another model's drafts"
    switched = book.recorded("ar", "draft", "another-model", WrittenDraft(256, 50, True))
    assert switched.of("ar", "draft", "another-model").drafts == (WrittenDraft(256, 50, True),)


def test_an_engine_with_too_few_drafts_of_its_own_is_expected_to_write_as_long_as_the_others() -> None:
    book = LengthBook()
    for _ in range(MIN_DRAFTS):
        book = book.recorded("ar", "draft", "smollm2", WrittenDraft(256, 100, True))
    book = book.recorded("diffusion", "draft", "draft", WrittenDraft(256, 256, False))
    expected = book.expected_tokens("draft", MODELS)
    # AR gets every draft: were diffusion estimated for 256 while AR's estimate learns, AR would always win.
    assert expected("diffusion", 256) == pytest.approx((3 * 100 + 256) / 4), "the four drafts together"
    for _ in range(MIN_DRAFTS - 1):
        book = book.recorded("diffusion", "draft", "draft", WrittenDraft(256, 256, False))
    assert book.expected_tokens("draft", MODELS)("diffusion", 256) == 256, "its own drafts, once known"
    assert LengthBook().expected_tokens("draft", MODELS)("diffusion", 256) == 256


def test_the_book_round_trips_and_a_bad_file_costs_only_a_warning(tmp_path: Path) -> None:
    book = LengthBook().recorded("ar", "draft", "smollm2", WrittenDraft(256, 100, True))
    book = book.recorded("diffusion", "infill", "draft", WrittenDraft(128, 128, False))
    path = tmp_path / "draft-lengths.toml"
    path.write_text(render_lengths(book))
    assert load_lengths(path) == (book, None)
    assert load_lengths(tmp_path / "missing.toml") == (LengthBook(), None)
    section = 'version = 1\n[ar.draft]\nmodel = "m"\n'
    bad = (
        "not = [toml",
        "version = 9",
        'version = 1\nar = "a table"',
        'version = 1\n[ar.essay]\nmodel = "m"',
        "version = 1\n[ar.draft]\nmodel = 3",
        section + "drafts = [{asked = 256, written = 10}]",
        section + "drafts = [{asked = 0, written = 0, ended = true}]",
        section + "drafts = [{asked = 256, written = -1, ended = true}]",
        section + "drafts = [{asked = true, written = 10, ended = true}]",
        section + "drafts = [{asked = 256, written = 10, ended = 1}]",
    )
    for text in bad:
        path.write_text(text)
        loaded, warning = load_lengths(path)
        assert loaded == LengthBook() and warning is not None and str(path) in warning


def test_estimates_are_for_the_length_each_engine_is_expected_to_write() -> None:
    book = LengthBook()
    for _ in range(MIN_DRAFTS):
        book = book.recorded("ar", "draft", "smollm2", WrittenDraft(256, 120, True))
        book = book.recorded("diffusion", "draft", "draft", WrittenDraft(256, 256, False))
    request = Request("draft", 256)
    route = decide(request, PROFILE, MODELS, BLOCKS, "fastest", expected=book.expected_tokens("draft", MODELS))
    ar = route.estimates["ar"]
    assert ar.expected_tokens == 120 and ar.detail.startswith("~120 of 256 tokens")
    assert ar.seconds == pytest.approx(estimate_ar(120, request.prompt_tokens, PROFILE.ar).seconds)
    assert route.estimates["diffusion"].expected_tokens is None, "its drafts ran to the length asked"
    assert route.as_json()["estimates"]["ar"]["expected_tokens"] == 120
    as_asked = decide(request, PROFILE, MODELS, BLOCKS, "fastest")
    assert as_asked.estimates["ar"].seconds == pytest.approx(estimate_ar(256, 32, PROFILE.ar).seconds)
    assert route.estimates["diffusion"] == as_asked.estimates["diffusion"]


def test_a_diffusion_draft_is_estimated_shorter_only_where_ending_early_saves_its_passes() -> None:
    book = LengthBook()
    for _ in range(MIN_DRAFTS):
        book = book.recorded("diffusion", "draft", "draft", WrittenDraft(256, 96, True))
    expected = book.expected_tokens("draft", MODELS)

    def plan_for(n: int) -> DiffusionPlan:
        return DiffusionPlan(max(1, n // 4), 8)

    def timestep(n: int) -> DiffusionPlan:
        return DiffusionPlan(max(1, n // 4), 8, schedule="timestep")

    assert draft_estimates(256, 32, 0, plan_for, PROFILE, expected)[1].expected_tokens == 96
    # With text after the draft the block-causal model runs the dual cache: every block's first pass decodes
    # the whole canvas of 256, as every pass of a timestep draft does.
    assert draft_estimates(256, 32, 40, plan_for, PROFILE, expected)[1].expected_tokens is None
    dual = replace(PROFILE, diffusion=replace(PROFILE.diffusion, cache="dual"))
    assert draft_estimates(256, 32, 0, plan_for, dual, expected)[1].expected_tokens is None
    assert draft_estimates(256, 32, 0, timestep, PROFILE, expected)[1].expected_tokens is None


def test_engines_are_compared_for_the_length_asked_and_the_wait_for_the_length_expected() -> None:
    # Per token diffusion is the cheaper here, but AR's drafts end by themselves at 100 tokens.
    def plan_for(n: int) -> DiffusionPlan:
        return DiffusionPlan(max(1, n // 4), 8)

    ar_ends_at_100 = lengths(*[(400, 100, True)] * MIN_DRAFTS)

    def expected(engine: EngineName, n: int) -> float:
        return ar_ends_at_100.expected(n) if engine == "ar" else float(n)

    route = decide(Request("draft", 400), PROFILE, MODELS, BLOCKS, "fastest", expected=expected)
    ar, diffusion = route.estimates["ar"], route.estimates["diffusion"]
    assert ar.seconds < diffusion.seconds, "AR's draft is expected to be over sooner: it writes a quarter"
    assert diffusion.seconds_as_asked < ar.seconds_as_asked
    assert route.engine == "diffusion", "an engine is not faster for writing less"
    assert f"{diffusion.seconds_as_asked:.1f} s against {ar.seconds_as_asked:.1f} s" in route.reason
    assert ar.asked_seconds == pytest.approx(estimate_ar(400, 32, PROFILE.ar).seconds)
    assert diffusion_faster(PROFILE, plan_for, 30, longest=600) == [(30, 600)]
