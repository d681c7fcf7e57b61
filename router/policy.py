"""Routing decisions: fixed rules first, then the policy, always with a reason a user can read."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace

from router.cost import DiffusionPlan, ExpectedTokens, asked_length, draft_estimates
from router.profile import CostProfile
from router.request import EngineName, Estimate, Policy, QualityGap, Request, Route, Rule

SHORT_OUTPUT_TOKENS = 30
# Fixed-step passes per draft token for each quality preset (threshold decoding, when configured, wins).
STEPS_PER_TOKEN = {"fast": 1 / 8, "balanced": 1 / 4, "best": 1 / 2}


class NoEngineAvailable(Exception):
    """No engine can serve the request (its model is missing, or the forced engine is)."""


def diffusion_plan(request: Request, base: DiffusionPlan) -> DiffusionPlan:
    """The diffusion settings for this request: the configured ones, with K scaled by the quality preset."""
    if base.threshold is not None:
        return base
    steps = max(1, math.ceil(request.output_tokens * STEPS_PER_TOKEN[request.quality]))
    n_blocks = math.ceil(request.output_tokens / base.block_length) if base.schedule == "blocks" else 1
    return DiffusionPlan(max(steps, n_blocks), base.block_length, None, base.schedule)


def decide(
    request: Request,
    profile: CostProfile,
    models: Mapping[EngineName, str],
    base_plan: DiffusionPlan,
    policy: Policy = "measured",
    quality_gap: QualityGap | None = None,
    expected: ExpectedTokens = asked_length,
) -> Route:
    """Choose an engine for `request` among those whose model is present (`models`: engine -> model name).
    `quality_gap`: the draft model's measured quality against AR's, where the catalogue has it; `expected`:
    the tokens each engine's drafts of this kind are expected to write (router/expected_lengths.py), which the
    estimated waits are for; the engines are compared for the length asked."""
    if request.output_tokens < 1:
        raise ValueError("a request must ask for at least one token")
    plan = diffusion_plan(request, base_plan)

    def plan_for(written: int) -> DiffusionPlan:
        return diffusion_plan(replace(request, output_tokens=written), base_plan)

    both = draft_estimates(
        request.output_tokens, request.prompt_tokens, request.suffix_tokens, plan_for, profile, expected
    )
    estimates: dict[EngineName, Estimate] = {e.engine: e for e in both if e.engine in models}
    engine, reason, rule = _choose(request, estimates, policy, quality_gap)
    if engine == "ar" and request.kind == "infill" and "diffusion" not in models:
        reason += "; AR sees only the text before the selection"
    if engine == "diffusion" and plan.threshold is not None:
        reason += f"; as many passes as the text takes, each settling what is at least {plan.threshold:.0%} sure"
    chosen_plan = plan if engine == "diffusion" else None
    return Route(engine, models[engine], request.output_tokens, chosen_plan, estimates, reason, policy, rule)


Choice = tuple[EngineName, str, Rule]


def _choose(
    request: Request, estimates: dict[EngineName, Estimate], policy: Policy, quality_gap: QualityGap | None
) -> Choice:
    if not estimates:
        raise NoEngineAvailable("no model is present for either engine: see `sharpen models`")
    if request.force_engine is not None:
        if request.force_engine not in estimates:
            raise NoEngineAvailable(f"the {request.force_engine} engine was asked for, but its model is not present")
        if request.forced_because:
            return request.force_engine, request.forced_because, "pinned"
        return request.force_engine, f"{request.force_engine} asked for explicitly", "forced"
    if len(estimates) == 1:
        (only,) = estimates
        missing = "diffusion" if only == "ar" else "AR"
        return only, f"only the {_label(only)} engine's model is present (no {missing} model configured)", "only_engine"
    ar, diffusion = estimates["ar"].seconds_as_asked, estimates["diffusion"].seconds_as_asked
    if request.kind == "complete":
        return "ar", "completions are short and appear token by token: AR", "completion"
    if request.stream_tokens:
        return "ar", "token-by-token streaming needs AR", "streaming"
    if request.output_tokens < SHORT_OUTPUT_TOKENS:
        return "ar", f"{request.output_tokens} tokens is short (under {SHORT_OUTPUT_TOKENS}): AR", "short"
    if policy == "fastest":
        winner: EngineName = "diffusion" if diffusion < ar else "ar"
        return (
            winner,
            f"fastest: {_label(winner)} estimated {min(ar, diffusion):.1f} s against {max(ar, diffusion):.1f} s",
            "fastest",
        )
    if request.kind == "chat":
        return "ar", "chat replies stream and may reason step by step: AR", "chat"
    if policy == "quality":
        why = (
            "refines the whole draft with both sides in view" if request.kind == "infill" else "refines the whole draft"
        )
        return "diffusion", f"quality: diffusion {why}", "quality"
    if policy == "measured":
        if request.kind == "infill":
            return _measured_rewrite(estimates, quality_gap)
        return _measured(estimates, quality_gap)
    behind = quality_gap.position_failure() if request.kind == "draft" and quality_gap is not None else None
    if behind is not None:
        return "ar", f"{behind}: AR", "design_quality_gap"
    budget = request.latency_budget_s
    if budget is not None and diffusion > budget and ar < diffusion:
        return (
            "ar",
            (f"diffusion estimated {diffusion:.1f} s breaks the {budget:.1f} s budget; AR estimated {ar:.1f} s"),
            "design_budget",
        )
    return (
        "diffusion",
        f"{request.kind}s of {request.output_tokens} tokens go to diffusion (estimated {diffusion:.1f} s)",
        "design",
    )


def _measured(estimates: dict[EngineName, Estimate], quality_gap: QualityGap | None) -> Choice:
    """The engine estimated faster among those whose measured drafts pass the gate (AR's always do)."""
    failure = quality_gap.failure() if quality_gap is not None else None
    if failure is not None:
        return "ar", f"{failure}: AR", "quality_gate"
    return _faster(
        estimates, "its measured drafts pass the quality gate" if quality_gap else "its drafts are not measured"
    )


def _measured_rewrite(estimates: dict[EngineName, Estimate], quality_gap: QualityGap | None) -> Choice:
    """A rewrite goes to diffusion only if its measured rewrites keep the selection's names and numbers at
    least as often as AR's; then (or where they were not measured) to the engine estimated faster."""
    failure = quality_gap.rewrite_failure() if quality_gap is not None else None
    if failure is not None:
        return "ar", f"{failure}: AR", "rewrite_gate"
    measured = quality_gap is not None and quality_gap.rewrites_kept is not None
    return _faster(
        estimates, "its rewrites keep names and numbers as AR's do" if measured else "its rewrites are not measured"
    )


def _faster(estimates: dict[EngineName, Estimate], gate: str) -> Choice:
    ar, diffusion = estimates["ar"].seconds_as_asked, estimates["diffusion"].seconds_as_asked
    winner: EngineName = "diffusion" if diffusion < ar else "ar"
    return (
        winner,
        (
            f"{_label(winner)} estimated faster: {min(ar, diffusion):.1f} s against {max(ar, diffusion):.1f} s "
            f"(the draft model: {gate})"
        ),
        "estimated_faster",
    )


def _label(engine: EngineName) -> str:
    return "AR" if engine == "ar" else "diffusion"
