"""What the router is asked and what it answers: plain dataclasses, shared by the CLI and the UI."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Kind = Literal["complete", "draft", "infill", "chat"]
EngineName = Literal["ar", "diffusion"]
Policy = Literal["measured", "design", "fastest", "quality"]
Quality = Literal["fast", "balanced", "best"]
# Which rule decided a route (router/policy.py), for code and tests; the reason says it for people.
Rule = Literal[
    "forced",
    "pinned",
    "only_engine",
    "completion",
    "streaming",
    "short",
    "fastest",
    "chat",
    "quality",
    "quality_gate",
    "rewrite_gate",
    "estimated_faster",
    "design_quality_gap",
    "design_budget",
    "design",
    "remote_down",
]
KINDS: tuple[Kind, ...] = ("complete", "draft", "infill", "chat")
POLICIES: tuple[Policy, ...] = ("measured", "design", "fastest", "quality")
QUALITIES: tuple[Quality, ...] = ("fast", "balanced", "best")
ENGINES: tuple[EngineName, ...] = ("ar", "diffusion")


def approximate_tokens(text: str) -> int:
    """A tokenizer-free token count for routing (English BPE averages about four characters a token)."""
    return max(1, round(len(text) / 4)) if text else 0


@dataclass(frozen=True)
class Request:
    kind: Kind
    output_tokens: int
    # Tokens of context the engine must read first (the prompt, or the text around a selection).
    prompt_tokens: int = 32
    suffix_tokens: int = 0
    stream_tokens: bool = False
    latency_budget_s: float | None = None
    quality: Quality = "balanced"
    force_engine: EngineName | None = None
    # Why that engine, where the request's options chose it rather than the user ("--threshold is read only
    # by the diffusion engine"): the route's reason.
    forced_because: str = ""


@dataclass(frozen=True)
class QualityGap:
    """How the draft model's measured drafts compare with the AR model's on instructions neither saw
    (models/catalogue.py: drafts_position, 0 AR's own drafts and 1 shuffled words; drafts_on_topic;
    drafts_repeats, the share of repeated word 3-grams), and the margins the policies accept. A figure is
    None where it was not measured."""

    draft_model: str
    behind: float  # in position
    margin: float
    on_topic: float | None = None
    ar_on_topic: float | None = None
    on_topic_margin: float = 0.1
    repeats: float | None = None
    ar_repeats: float | None = None
    repeats_margin: float = 0.05
    # The share of a selection's names and numbers its rewrites keep (the catalogue's rewrites_kept).
    rewrites_kept: float | None = None
    ar_rewrites_kept: float | None = None
    # Drafts into a document: the share of the facts asked that they state, and of the stances asked that they
    # turn around (the catalogue's drafts_facts and drafts_flips).
    facts: float | None = None
    ar_facts: float | None = None
    flips: float | None = None
    ar_flips: float | None = None
    faithful_margin: float = 0.1

    def rewrite_failure(self) -> str | None:
        """In words, how the draft model's rewrites keep fewer of the selection's names and numbers than AR's,
        where both were measured and it does; None otherwise (rewrites must keep the facts at least as
        often as AR's)."""
        kept, ar_kept = self.rewrites_kept, self.ar_rewrites_kept
        if kept is None or ar_kept is None or kept >= ar_kept:
            return None
        return (
            f"{self.draft_model}'s rewrites keep {kept:.0%} of the selection's names and numbers against AR's "
            f"{ar_kept:.0%}"
        )

    def position_failure(self) -> str | None:
        """In words, how far the draft model's drafts sit behind AR's in position, where that is more than its
        margin (the design policy's gate, and the first of the measured policy's)."""
        if self.behind <= self.margin:
            return None
        return (
            f"{self.draft_model}'s drafts sit {self.behind:.2f} behind AR's on instructions it never saw "
            f"(0: AR's own, 1: shuffled words), more than router.quality_margin ({self.margin:.2f})"
        )

    def failure(self) -> str | None:
        """The first measured figure on which the draft model falls further behind AR's than its margin, in
        words; None where every measured one is within (the measured policy's gate)."""
        position = self.position_failure()
        if position is not None:
            return position
        on_topic, ar_on_topic, repeats, ar_repeats = self.on_topic, self.ar_on_topic, self.repeats, self.ar_repeats
        # Rounded as the position gap is: the figures have two decimals, and 0.95 - 0.1 must not read as 0.8499...
        if on_topic is not None and ar_on_topic is not None and on_topic < round(ar_on_topic - self.on_topic_margin, 6):
            return (
                f"{self.draft_model} is on topic for {on_topic:.0%} of instructions it never saw against AR's "
                f"{ar_on_topic:.0%}, more than router.on_topic_margin ({self.on_topic_margin:.0%}) behind"
            )
        if repeats is not None and ar_repeats is not None and repeats > round(ar_repeats + self.repeats_margin, 6):
            return (
                f"{repeats:.0%} of {self.draft_model}'s word 3-grams repeat against AR's {ar_repeats:.0%}, more "
                f"than router.repeats_margin ({self.repeats_margin:.0%}) over"
            )
        return self.faithfulness_failure()

    def faithfulness_failure(self) -> str | None:
        """In words, how the draft model's drafts into a document say less of what was asked than AR's: fewer
        of the facts, or more stances turned around, by more than router.faithful_margin; None otherwise."""
        facts, ar_facts, flips, ar_flips = self.facts, self.ar_facts, self.flips, self.ar_flips
        if facts is not None and ar_facts is not None and facts < round(ar_facts - self.faithful_margin, 6):
            return (
                f"{self.draft_model}'s drafts into a document state {facts:.0%} of the facts asked against AR's "
                f"{ar_facts:.0%}, more than router.faithful_margin ({self.faithful_margin:.0%}) behind"
            )
        if flips is not None and ar_flips is not None and flips > round(ar_flips + self.faithful_margin, 6):
            return (
                f"{self.draft_model}'s drafts into a document turn {flips:.0%} of the stances asked around "
                f"(a decline written as an acceptance) against AR's {ar_flips:.0%}, more than "
                f"router.faithful_margin ({self.faithful_margin:.0%}) over"
            )
        return None


@dataclass(frozen=True)
class Estimate:
    engine: EngineName
    seconds: float
    # What the estimate assumed, in words ("64 passes x 0.41 s over 144 positions").
    detail: str
    # The tokens the draft is expected to write, where fewer than asked (the engine's drafts end earlier):
    # then `seconds` is for those, and `asked_seconds` for the length asked.
    expected_tokens: int | None = None
    asked_seconds: float | None = None

    @property
    def seconds_as_asked(self) -> float:
        """The estimate for the length asked: what engines are compared by (the same work for both, so an
        engine whose drafts stop sooner is not called faster for writing less)."""
        return self.seconds if self.asked_seconds is None else self.asked_seconds


@dataclass(frozen=True)
class DiffusionPlan:
    """The diffusion settings the cost depends on, and that a diffusion route chooses."""

    steps: int
    block_length: int
    threshold: float | None = None
    schedule: str = "blocks"


@dataclass(frozen=True)
class Route:
    engine: EngineName
    model: str
    max_tokens: int
    # The diffusion settings chosen (None when AR serves the request).
    plan: DiffusionPlan | None = None
    estimates: dict[EngineName, Estimate] = field(default_factory=dict)
    reason: str = ""
    policy: Policy = "measured"
    rule: Rule = "forced"

    @property
    def settings(self) -> dict[str, Any]:
        """The engine settings as `--json` shows them: max_tokens for AR; the plan's for diffusion."""
        if self.plan is None:
            return {"max_tokens": self.max_tokens}
        plan = self.plan
        return {
            "steps": plan.steps,
            "block_length": plan.block_length,
            "threshold": plan.threshold,
            "schedule": plan.schedule,
        }

    def as_json(self) -> dict[str, Any]:
        return {
            "engine": self.engine,
            "model": self.model,
            "settings": self.settings,
            "reason": self.reason,
            "policy": self.policy,
            "rule": self.rule,
            "estimates": {
                name: {
                    "seconds": round(e.seconds, 4),
                    "expected_tokens": e.expected_tokens or self.max_tokens,
                    "seconds_as_asked": round(e.seconds_as_asked, 4),
                    "detail": e.detail,
                }
                for name, e in self.estimates.items()
            },
        }
