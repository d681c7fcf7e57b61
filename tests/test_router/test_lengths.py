"""How long each engine's drafts run (router/lengths.py), and estimates for the length a draft will write."""

from __future__ import annotations

from pathlib import Path

import pytest

from router.cost import DiffusionPlan, diffusion_faster, draft_estimates, estimate_ar
from router.lengths import (
    KEPT_DRAFTS,
    MIN_DRAFTS,
    DraftLengths,
    LengthBook,
    WrittenDraft,
    load_lengths,
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


def test_a_draft_of_n_is_expected_to_write_what_each_known_draft_would_have_written() -> None:
    known = lengths((256, 100, True), (256, 256, False), (128, 60, True), (256, 256, False), (256, 90, True))
    # Asked for 80: the drafts that ended at 100 and 90 would have written 80, the one at 60 60; the ones cut
    # at 256 run on. The median of 80, 80, 60, 80, 80.
    assert known.expected(80) == 80
    # Asked for 400: a draft cut at 256 may have run on to 400, so the estimate errs long: 100, 400, 60, 400, 90.
    assert known.expected(400) == 100
    # Asked for 200: 100, 200, 60, 200, 90; the typical draft, not the mean (130).
    assert known.expected(200) == 100
    assert lengths((256, 100, True), (256, 256, False), (256, 256, False)).expected(256) == 256


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
    assert expected("diffusion", 256) == 256, "no diffusion draft known"
    assert book.expected_tokens("infill", MODELS)("ar", 256) == 256, "rewrites are another kind"
    assert book.expected_tokens("draft", {"ar": "another-model"})("ar", 256) == 256, "another model's drafts"
    switched = book.recorded("ar", "draft", "another-model", WrittenDraft(256, 50, True))
    assert switched.of("ar", "draft", "another-model").drafts == (WrittenDraft(256, 50, True),)


def test_the_book_round_trips_and_a_bad_file_costs_only_a_warning(tmp_path: Path) -> None:
    book = LengthBook().recorded("ar", "draft", "smollm2", WrittenDraft(256, 100, True))
    book = book.recorded("diffusion", "infill", "draft", WrittenDraft(128, 128, False))
    path = tmp_path / "draft-lengths.toml"
    path.write_text(render_lengths(book))
    assert load_lengths(path) == (book, None)
    assert load_lengths(tmp_path / "missing.toml") == (LengthBook(), None)
    for text in ("not = [toml", "version = 9", 'version = 1\n[ar.draft]\nmodel = "m"\ndrafts = [{asked = -1}]'):
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
    assert route.as_json()["estimates"]["ar"]["tokens"] == 120
    as_asked = decide(request, PROFILE, MODELS, BLOCKS, "fastest")
    assert as_asked.estimates["ar"].seconds == pytest.approx(estimate_ar(256, 32, PROFILE.ar).seconds)
    assert route.estimates["diffusion"] == as_asked.estimates["diffusion"]


def test_the_crossover_follows_the_lengths_the_router_estimates_for() -> None:
    # Per token diffusion is the cheaper here, but AR's drafts end by themselves at 100 tokens.
    def plan_for(n: int) -> DiffusionPlan:
        return DiffusionPlan(max(1, n // 4), 8)

    ar_ends_at_100 = lengths(*[(400, 100, True)] * MIN_DRAFTS)

    def expected(engine: EngineName, n: int) -> float:
        return ar_ends_at_100.expected(n) if engine == "ar" else float(n)

    as_asked = diffusion_faster(PROFILE, plan_for, 30, longest=600)
    learnt = diffusion_faster(PROFILE, plan_for, 30, longest=600, expected=expected)
    assert as_asked == [(30, 600)] and learnt[0][0] == 30 and learnt[-1][1] < 600
    for lo, hi in learnt:
        for n in (lo, hi):
            ar, diffusion = draft_estimates(n, 32, 0, plan_for, PROFILE, expected)
            assert diffusion.seconds < ar.seconds
