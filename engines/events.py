"""The plain event types every engine yields. No engine or UI library is imported here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

FinishReason = Literal["stop", "length", "eos", "cancelled"]


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
    def tokens_per_s(self) -> float:
        """Decode speed after the first token (prompt evaluation excluded)."""
        if self.time_to_first_token_s is None or self.generated_tokens < 2:
            return 0.0
        decode_s = self.total_s - self.time_to_first_token_s
        return (self.generated_tokens - 1) / decode_s if decode_s > 0 else 0.0


@dataclass(frozen=True)
class Done:
    """The last event of every generation, cancelled ones included."""

    text: str
    stats: GenerationStats


Event = Token | Done


@dataclass(frozen=True)
class EngineInfo:
    name: str
    model: str
    model_path: str
    backend: str
    device: str
    context_length: int
