"""What every autoregressive engine offers (the local llama.cpp one, a remote OpenAI-compatible one)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from engines.cancel import CancelToken
from engines.events import Event
from engines.messages import Instruction

TrimPolicy = Literal["left", "error"]
# A fill-in-the-middle prompt wraps the text in prefix, suffix and middle tokens; the text after the cursor
# keeps at most this share of the budget (its start: the text nearest the cursor matters most).
FIM_TOKENS = 3
AFTER_CURSOR_SHARE = 4


def fim_budgets(budget: int) -> tuple[int, int]:
    """A fill-in-the-middle prompt's budget for the text around the cursor, and the most of it that the text
    after the cursor may take."""
    return budget - FIM_TOKENS, max(0, budget // AFTER_CURSOR_SHARE)


@dataclass(frozen=True)
class Sampling:
    """How tokens are drawn: temperature 0 is greedy; a seed repeats a sampled reply (None: a fresh draw);
    `no_repeat_ngram` n > 1: no run of n tokens is generated twice (engines/repeats.py; a local engine's)."""

    temperature: float = 0.0
    top_p: float = 0.95
    # llama.cpp's own defaults: where the sampled tokens may come from when temperature > 0.
    top_k: int = 40
    min_p: float = 0.05
    seed: int | None = None
    no_repeat_ngram: int = 0
    # No end of text before this many tokens (a local engine's).
    min_tokens: int = 0


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
        reply_start: str = "",
    ) -> Iterator[Event]:
        """The model's reply to an instruction or a conversation; with `reply_start`, the reply is taken to
        begin with that text (written for the model, not streamed) and the model goes on from it."""
        ...

    def forget_cache(self) -> None: ...

    def count_tokens(self, text: str) -> int: ...

    def chat_prompt_length(self, instruction: Instruction, reply_start: str = "") -> int:
        """Tokens of the prompt a chat call builds for `instruction` (and `reply_start`), the template's own
        included."""
        ...

    @property
    def continues_replies(self) -> bool:
        """Whether a chat call can be given the start of its reply (`reply_start`)."""
        ...

    @property
    def fills_middle(self) -> bool:
        """Whether a completion is given the text after the cursor too."""
        ...

    def leading_text(self, text: str, tokens: int) -> str:
        """The start of `text` that is about `tokens` tokens long (calibration's prompt)."""
        ...
