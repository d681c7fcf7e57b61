"""The plain event types every engine yields. No engine or UI library is imported here."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

FinishReason = Literal["stop", "length", "eos", "cancelled"]
MASKED_PIECE = ""


@dataclass(frozen=True)
class Token:
    """One generated token of an autoregressive stream."""

    text: str
    token_id: int
    index: int


@dataclass(frozen=True)
class GenerationStats:
    prompt_tokens: int
    # Prompt tokens that were already in the engine's cache from the previous call and were not evaluated again.
    reused_tokens: int
    # Tokens cut from the left of a prompt that did not fit the context.
    trimmed_tokens: int
    generated_tokens: int
    # From the call to the first sampled token: prompt evaluation plus one decode step.
    time_to_first_token_s: float | None
    total_s: float
    finish_reason: FinishReason

    @property
    def working_s(self) -> float:
        """The time the engine worked on the request: all of it (an AR stream never gives way)."""
        return self.total_s

    @property
    def tokens_per_s(self) -> float:
        """Decode speed after the first token (prompt evaluation excluded)."""
        if self.time_to_first_token_s is None or self.generated_tokens < 2:
            return 0.0
        decode_s = self.total_s - self.time_to_first_token_s
        return (self.generated_tokens - 1) / decode_s if decode_s > 0 else 0.0

    def as_json(self) -> dict[str, Any]:
        first = self.time_to_first_token_s
        return {
            "finish_reason": self.finish_reason,
            "tokens": {
                "prompt": self.prompt_tokens,
                "reused": self.reused_tokens,
                "trimmed": self.trimmed_tokens,
                "generated": self.generated_tokens,
            },
            "timings": {
                "time_to_first_token_ms": None if first is None else round(first * 1000, 2),
                "total_ms": round(self.total_s * 1000, 2),
                "tokens_per_s": round(self.tokens_per_s, 2),
            },
        }


@dataclass(frozen=True)
class Pass:
    """One refinement pass of a diffusion draft: the whole canvas after this pass's commits."""

    index: int
    canvas: tuple[int, ...]
    # Text of each canvas position; MASKED_PIECE where the position is still masked.
    pieces: tuple[str, ...]
    masked: tuple[bool, ...]
    committed: tuple[int, ...]
    # Confidence of each position in `committed` (same order): the probability of the committed token.
    confidences: tuple[float, ...]
    # Canvas positions [0, stable_prefix) are committed and will not change: safe to stream.
    stable_prefix: int
    # The canvas window this pass could commit into (the current block, or the whole canvas).
    window: tuple[int, int]
    elapsed_s: float
    # The passes the draft takes as planned after this one (more than its settings' steps where the end-of-text
    # rule held masks back); None where the text decides (a threshold) or nobody knows (a trace read back,
    # which does not keep it: a progress report, not part of what the pass did, so equality ignores it).
    planned_passes: int | None = field(default=None, compare=False)

    @property
    def stable_text(self) -> str:
        return "".join(self.pieces[: self.stable_prefix])


@dataclass(frozen=True)
class DiffusionStats:
    prompt_tokens: int
    canvas_tokens: int
    # Tokens of the draft itself: the canvas minus the end-of-text padding trimmed from it.
    generated_tokens: int
    passes: int
    total_s: float
    # Time inside the backend (the model's forward passes); the rest is the Python sampler.
    backend_s: float
    finish_reason: FinishReason
    # Time the draft gave way to completions between passes (ghost text runs first).
    waited_s: float = 0.0
    # Steps of Dream's schedule that committed nothing, so ran no forward pass (0-based, in step order).
    skipped_steps: tuple[int, ...] = ()
    # Why a backend that keeps a cache computed every pass in full ("" when it used it, or has none).
    uncached_because: str = ""
    # The cache the passes used: none, prefix, dual or block (engines.diffusion.backend.CacheMode).
    cache: str = "none"
    # Why the cache differs from the one configured, or what it could not see ("" when nothing to say).
    cache_note: str = ""

    @property
    def working_s(self) -> float:
        """The time the engine worked on the draft: all of it but the time it gave way to completions."""
        return self.total_s - self.waited_s

    @property
    def ms_per_pass(self) -> float:
        return self.working_s * 1000 / self.passes if self.passes else 0.0

    @property
    def tokens_per_s(self) -> float:
        return self.generated_tokens / self.total_s if self.total_s > 0 else 0.0

    @property
    def sampler_share(self) -> float:
        return 1 - self.backend_s / self.working_s if self.working_s > 0 else 0.0

    def as_json(self) -> dict[str, Any]:
        return {
            "finish_reason": self.finish_reason,
            "tokens": {"prompt": self.prompt_tokens, "canvas": self.canvas_tokens, "generated": self.generated_tokens},
            "passes": self.passes,
            "skipped_steps": list(self.skipped_steps),
            "cache": self.cache,
            "uncached_because": self.uncached_because,
            "cache_note": self.cache_note,
            "timings": {
                "total_ms": round(self.total_s * 1000, 2),
                "ms_per_pass": round(self.ms_per_pass, 2),
                "tokens_per_s": round(self.tokens_per_s, 2),
                "sampler_share": round(self.sampler_share, 4),
            },
        }


@dataclass(frozen=True)
class Done:
    """The last event of every generation, cancelled ones included."""

    text: str
    stats: GenerationStats | DiffusionStats


Event = Token | Pass | Done
