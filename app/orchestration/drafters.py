"""Each engine's drafter: it lays out its own engine's prompt and fits the document around the cursor to its
own engine's context, as simonw/llm's models own `execute()`.

A drafter turns a request and its typed options (AR: Sampling; diffusion: DiffusionSettings) into a Job:
nothing runs until the Reply opens it, in the caller's thread; opening loads the engine, fits the document
and starts the engine's stream, and returns what the model was given of the document with the events.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace

from app.domain.context import ContextUse, document_instruction, fit_context
from app.domain.draft_request import DraftRequest
from app.domain.job import Job, Opened
from engines.ar_engine import AREngine, Sampling, TrimPolicy, fim_budgets
from engines.cancel import CancelToken
from engines.diffusion.engine import DiffusionEngine
from engines.diffusion.settings import DiffusionSettings
from engines.diffusion.settled import stopping_at
from engines.events import Done, Pass
from engines.messages import Instruction


def _fitted(
    request: DraftRequest, budget: int, engine: AREngine | DiffusionEngine, after_at_most: int | None = None
) -> ContextUse | None:
    if not request.before and not request.after:
        return None
    return fit_context(request.before, request.after, budget, engine.count_tokens, after_at_most=after_at_most)


class ArDrafter:
    """The AR engine's prompts: completions (fill-in-the-middle where the model has it), chat replies, and
    drafts into a document."""

    def __init__(self, engine: Callable[[], AREngine]) -> None:
        self.engine = engine

    def completion(
        self,
        prefix: str,
        suffix: str | None,
        tokens: int,
        sampling: Sampling,
        cancel: CancelToken | None,
        *,
        stop: Sequence[str] = (),
        trim: TrimPolicy = "left",
    ) -> Job:
        def start() -> Opened:
            engine = self.engine()
            events = engine.complete(
                prefix, suffix, max_tokens=tokens, stop=tuple(stop), sampling=sampling, cancel=cancel, trim=trim
            )
            return Opened(events, engine)

        return Job(tokens, start)

    def answer(
        self,
        instruction: Instruction,
        tokens: int,
        sampling: Sampling,
        cancel: CancelToken | None,
        stop: Sequence[str] = (),
    ) -> Job:
        def start() -> Opened:
            engine = self.engine()
            events = engine.chat(instruction, max_tokens=tokens, stop=tuple(stop), sampling=sampling, cancel=cancel)
            return Opened(events, engine)

        return Job(tokens, start)

    def draft(self, request: DraftRequest, tokens: int, sampling: Sampling, cancel: CancelToken | None) -> Job:
        return Job(tokens, lambda: self._open_draft(request, tokens, sampling, cancel))

    def _open_draft(self, request: DraftRequest, tokens: int, sampling: Sampling, cancel: CancelToken | None) -> Opened:
        engine = self.engine()
        stop = request.stop
        if not request.asked:  # what belongs at the cursor: a continuation (FIM where the model has it)
            budget = engine.context_length - tokens
            if engine.fills_middle:
                text_budget, after_at_most = fim_budgets(budget)
                context = _fitted(request, text_budget, engine, after_at_most)
            else:  # the model sees only the text before the cursor: the rest is said to be left out
                kept = _fitted(replace(request, after=""), budget, engine) or ContextUse("", "")
                in_document = bool(request.before or request.after)
                context = replace(kept, left_out_after=len(request.after)) if in_document else None
            before, after = (context.before, context.after) if context is not None else ("", "")
            events = engine.complete(before, after, max_tokens=tokens, stop=stop, sampling=sampling, cancel=cancel)
            return Opened(events, engine, context)
        asked, context = request.asked, None
        if request.kind == "draft" and (request.before or request.after):
            # The document goes into the request: the reply is the text for the cursor. The prompt's
            # template, history and the words around the document are measured with a stand-in for it.
            framing = engine.chat_prompt_length(request.conversation(document_instruction(asked, ".", ".")))
            context = _fitted(request, engine.context_length - tokens - framing, engine)
            if context is not None:
                asked = document_instruction(asked, context.before, context.after)
        conversation = request.conversation(asked)
        events = engine.chat(conversation, max_tokens=tokens, stop=stop, sampling=sampling, cancel=cancel)
        return Opened(events, engine, context)


class DiffusionDrafter:
    """The diffusion engine's prompts: an instruction's canvas (between the text around the cursor, in a
    document) or an infill between the two sides."""

    def __init__(self, engine: Callable[[], DiffusionEngine]) -> None:
        self.engine = engine

    def draft(self, request: DraftRequest, tokens: int, settings: DiffusionSettings, cancel: CancelToken | None) -> Job:
        return Job(tokens, lambda: self._open_draft(request, tokens, settings, cancel), settings)

    def _open_draft(
        self, request: DraftRequest, tokens: int, settings: DiffusionSettings, cancel: CancelToken | None
    ) -> Opened:
        engine = self.engine()
        own = CancelToken(parent=cancel)  # also stops the passes once a stop string has settled
        if request.asked and request.kind == "draft" and engine.block_causal and (request.before or request.after):
            events, context = self._document_in_request(engine, request, tokens, settings, own)
        else:
            asked = request.conversation() if request.asked else ""
            prompt = len(engine.instruction_prompt(asked, chat=request.chat)) if asked else 1
            context = _fitted(request, engine.context_length - tokens - prompt, engine)
            before, after = (context.before, context.after) if context is not None else ("", "")
            events = (
                engine.draft(asked, tokens, settings, chat=request.chat, cancel=own, before=before, after=after)
                if asked
                else engine.infill(before, after, tokens, settings, cancel=own)
            )
        if request.stop:
            events = stopping_at(events, request.stop, engine.decode, own)
        return Opened(events, engine, context)

    @staticmethod
    def _document_in_request(
        engine: DiffusionEngine, request: DraftRequest, tokens: int, settings: DiffusionSettings, cancel: CancelToken
    ) -> tuple[Iterator[Pass | Done], ContextUse | None]:
        """A block-causal model never reads past the block it refines: the document goes into the request, as
        the AR drafter lays it out (and as the drafter was trained to read it)."""
        framing = engine.instruction_prompt(
            request.conversation(document_instruction(request.asked, ".", ".")), chat=request.chat
        )
        context = _fitted(request, engine.context_length - tokens - len(framing), engine)
        asked = document_instruction(request.asked, context.before, context.after) if context else request.asked
        return engine.draft(request.conversation(asked), tokens, settings, chat=request.chat, cancel=cancel), context
