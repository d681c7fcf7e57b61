"""What the router is asked and what it answers: plain dataclasses, shared by the CLI and the UI."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Kind = Literal["complete", "draft", "infill", "chat"]
EngineName = Literal["ar", "diffusion"]
Policy = Literal["design", "fastest", "quality"]
Quality = Literal["fast", "balanced", "best"]
KINDS: tuple[Kind, ...] = ("complete", "draft", "infill", "chat")
POLICIES: tuple[Policy, ...] = ("design", "fastest", "quality")
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


@dataclass(frozen=True)
class QualityGap:
    """How far the draft model's measured drafts sit behind the AR model's (models/catalogue.py
    drafts_position: 0 AR's own drafts, 1 shuffled words), and the most the design policy accepts."""

    draft_model: str
    behind: float
    margin: float


@dataclass(frozen=True)
class Estimate:
    engine: EngineName
    seconds: float
    # What the estimate assumed, in words ("64 passes x 0.41 s over 144 positions").
    detail: str


@dataclass(frozen=True)
class Route:
    engine: EngineName
    model: str
    # Engine settings: max_tokens for AR; steps, block_length, threshold for diffusion.
    settings: dict[str, Any]
    estimates: dict[EngineName, Estimate] = field(default_factory=dict)
    reason: str = ""
    policy: Policy = "design"

    def as_json(self) -> dict[str, Any]:
        return {
            "engine": self.engine,
            "model": self.model,
            "settings": self.settings,
            "reason": self.reason,
            "policy": self.policy,
            "estimates": {
                name: {"seconds": round(e.seconds, 4), "detail": e.detail} for name, e in self.estimates.items()
            },
        }
