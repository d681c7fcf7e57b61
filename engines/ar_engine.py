"""What every autoregressive engine offers (the local llama.cpp one, a remote OpenAI-compatible one)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from engines.cancel import CancelToken
from engines.events import Event
from engines.messages import Instruction

TrimPolicy = Literal["left", "error"]


@dataclass(frozen=True)
class Sampling:
    """How tokens are drawn: temperature 0 is greedy; a seed repeats a sampled reply (None: a fresh draw);
    `no_repeat_ngram` n > 1: no run of n tokens is generated twice (engines/repeats.py; a local engine's)."""

    temperature: float = 0.0
    top_p: float = 0.95
    seed: int | None = None
    no_repeat_ngram: int = 0


GREEDY = Sampling()


class AREngine(Protocol):
    backend: str
    model_name: str

    @property
    def context_length(self) -> int: ...

    def complete(
        self,
        prefix: str,
        suffix: str | None = None,
        *,
        max_tokens: int,
        stop: Sequence[str] = (),
        sampling: Sampling = GREEDY,
        cancel: CancelToken | None = None,
        trim: TrimPolicy = "left",
    ) -> Iterator[Event]: ...

    def chat(
        self,
        instruction: Instruction,
        *,
        max_tokens: int,
        stop: Sequence[str] = (),
        sampling: Sampling = GREEDY,
        cancel: CancelToken | None = None,
    ) -> Iterator[Event]: ...

    def forget_cache(self) -> None: ...

    def count_tokens(self, text: str) -> int: ...

    def chat_prompt_length(self, instruction: Instruction) -> int:
        """Tokens of the prompt a chat call builds for `instruction`, the template's own included."""
        ...

    @property
    def fills_middle(self) -> bool:
        """Whether a completion is given the text after the cursor too."""
        ...

    def leading_text(self, text: str, tokens: int) -> str:
        """The start of `text` that is about `tokens` tokens long (calibration's prompt)."""
        ...
