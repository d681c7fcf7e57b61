"""The diffusion engine: prompts in, refinement passes out, over any DiffusionBackend."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from engines.cancel import CancelToken
from engines.diffusion.backend import TextDiffusionBackend
from engines.diffusion.sampler import DiffusionSampler
from engines.diffusion.settings import DiffusionSettings
from engines.errors import EmptyPromptError, PromptTooLongError
from engines.events import Done, Pass
from engines.messages import Instruction, is_blank, plain_text


@dataclass(frozen=True)
class DraftPrompt:
    """The token layout of one request: prompt, a canvas of `length` masks, then the suffix."""

    prompt: list[int]
    length: int
    suffix: list[int]


class DiffusionEngine:
    def __init__(self, backend: TextDiffusionBackend, model_name: str) -> None:
        self.backend = backend
        self.model_name = model_name
        self.sampler = DiffusionSampler(backend)
        # One user of the backend at a time (a draft, or a calibration in the background): held while a
        # draft's passes are read. Re-entrant, as a calibration drafts too.
        self.lock = threading.RLock()

    def draft_prompt(
        self, instruction: Instruction, length: int, *, chat: bool = True, before: str = "", after: str = ""
    ) -> DraftPrompt:
        """The canvas after the instruction; in a document, between the text before the cursor (which the
        reply is written to go on from) and the text after it."""
        if is_blank(instruction):
            raise EmptyPromptError()
        tokens = self.instruction_prompt(instruction, chat=chat)
        tokens += self.backend.tokenize(before, add_bos=False) if before else []
        suffix = self.backend.tokenize(after, add_bos=False) if after else []
        return self._fits(DraftPrompt(tokens, length, suffix))

    def instruction_prompt(self, instruction: Instruction, *, chat: bool = True) -> list[int]:
        if chat:
            return self.backend.instruction_tokens(instruction)
        return self.backend.tokenize(plain_text(instruction), add_bos=True)

    def count_tokens(self, text: str) -> int:
        return len(self.backend.tokenize(text, add_bos=False)) if text else 0

    @property
    def context_length(self) -> int:
        return self.backend.context_length

    @property
    def block_causal(self) -> bool:
        """Whether the model never reads text after the block it refines (a document's text after the
        cursor then belongs in the request, as for an AR model)."""
        return self.backend.block_causal

    @property
    def backend_name(self) -> str:
        return self.backend.backend

    @property
    def mask_token_id(self) -> int:
        return self.backend.mask_token_id

    def decode(self, tokens: Sequence[int]) -> str:
        return self.backend.decode(tokens)

    def infill_prompt(self, before: str, after: str, length: int) -> DraftPrompt:
        if not before.strip() and not after.strip():
            raise EmptyPromptError()
        prompt = self.backend.tokenize(before, add_bos=True) if before else self.backend.tokenize(" ", add_bos=True)[:1]
        return self._fits(DraftPrompt(prompt, length, self.backend.tokenize(after, add_bos=False)))

    def _fits(self, layout: DraftPrompt) -> DraftPrompt:
        context = self.backend.context_length
        if len(layout.prompt) + layout.length + len(layout.suffix) > context:
            raise PromptTooLongError(len(layout.prompt) + len(layout.suffix), layout.length, context, "diffusion.n_ctx")
        return layout

    def draft(
        self,
        instruction: Instruction,
        length: int,
        settings: DiffusionSettings,
        *,
        chat: bool = True,
        cancel: CancelToken | None = None,
        before: str = "",
        after: str = "",
    ) -> Iterator[Pass | Done]:
        """Draft `length` tokens answering `instruction` (through the chat template unless chat=False), between
        `before` and `after` where the draft goes into a document."""
        layout = self.draft_prompt(instruction, length, chat=chat, before=before, after=after)
        passes = self.sampler.generate(layout.prompt, layout.length, settings, suffix=layout.suffix, cancel=cancel)
        return self._locked(passes)

    def infill(
        self,
        before: str,
        after: str,
        length: int,
        settings: DiffusionSettings,
        *,
        cancel: CancelToken | None = None,
    ) -> Iterator[Pass | Done]:
        """Write `length` tokens between `before` and `after`, conditioned on both."""
        layout = self.infill_prompt(before, after, length)
        passes = self.sampler.generate(layout.prompt, layout.length, settings, suffix=layout.suffix, cancel=cancel)
        return self._locked(passes)

    def _locked(self, events: Iterator[Pass | Done]) -> Iterator[Pass | Done]:
        with self.lock:
            yield from events
