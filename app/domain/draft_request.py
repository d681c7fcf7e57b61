"""What a draft asks for: a draft written at the cursor or a rewrite of the selection, with the document
around it, as every front end (the TUI, the CLI, the server) builds it."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import KW_ONLY, dataclass, field
from typing import Any, Literal

from app.domain.context import rewrite_instruction
from engines.diffusion.settings import BOTH_ENGINES, DIFFUSION_ONLY
from engines.messages import ChatMessage
from router.request import EngineName, Policy, Quality, Request, approximate_tokens

DraftKind = Literal["draft", "infill"]


def request_option(default: Any, read_by: tuple[str, ...]) -> Any:
    """A field of the request that a front end sets as an option (`--tokens`), with the engines that read it,
    as DiffusionSettings' options declare theirs: a request that sets one only one engine reads is drafted by
    that engine."""
    return field(default=default, metadata={"read_by": read_by})


def option_named(name: str) -> str:
    """An option as a message names it, where the front end has no spelling of its own (the editor's)."""
    return name


@dataclass(frozen=True)
class DraftRequest:
    """A draft written at the cursor, or a rewrite of the selection, as the user asked for it.

    - `draft` with an instruction: text that answers it, written to fit between `before` and `after` (the
      document around the cursor); without one, what belongs at the cursor.
    - `infill` (a rewrite): new text for `selection`, between `before` and `after`, following the
      instruction where there is one.
    """

    kind: DraftKind
    instruction: str = ""
    _: KW_ONLY
    # The document before and after the cursor (or the selection); the service fits them to the model.
    before: str = ""
    after: str = ""
    # The text a rewrite replaces.
    selection: str = ""
    # None: the configured diffusion.tokens. AR writes at most as many.
    tokens: int | None = request_option(None, BOTH_ENGINES)
    # DiffusionSettings options given for this request only (the command line's flags); fixing `steps`
    # here keeps them, instead of the router's K.
    overrides: Mapping[str, Any] = field(default_factory=dict)
    engine: EngineName | None = None
    # Why `engine` drafts this request, where its options chose it (app/domain/option_engines.py): the
    # route's reason says it.
    engine_because: str = ""
    policy: Policy | None = None
    # None: router.quality. The passes per token of a diffusion draft (AR's drafts take none).
    quality: Quality | None = request_option(None, DIFFUSION_ONLY)
    # False: the instruction is plain text, not put through the model's chat template (the AR drafter lays
    # out every instruction with its chat template).
    chat: bool = request_option(True, DIFFUSION_ONLY)
    # True: the caller saves the reply's trace (Reply.trace): refinement passes, or AR tokens with their times.
    record_trace: bool = request_option(False, BOTH_ENGINES)
    # Turns of a conversation before the instruction (a system message, earlier replies): a draft answers
    # the whole conversation.
    history: tuple[ChatMessage, ...] = ()
    # The text ends before the first of these (a diffusion draft stops refining once one has settled).
    stop: tuple[str, ...] = ()
    # How the front end that built the request names an option to the user ("--threshold",
    # "sharpen.threshold"), for what the route's reason and errors say about its options.
    spelling: Callable[[str], str] = option_named

    @property
    def given_options(self) -> dict[str, Any]:
        """The options this request sets (its overrides that are not None)."""
        return {name: value for name, value in self.overrides.items() if value is not None}

    @property
    def asked(self) -> str:
        """What the model is asked to do ("" for none: write what belongs in the gap)."""
        if self.kind == "infill" and self.instruction.strip():
            return rewrite_instruction(self.instruction, self.selection)
        return self.instruction if self.instruction.strip() else ""

    def conversation(self, asked: str | None = None) -> str | list[ChatMessage]:
        """What the model answers: the request (`asked`, or what the user asked) alone, or the conversation
        that ends with it."""
        asked = self.asked if asked is None else asked
        if not self.history:
            return asked
        return [*self.history, {"role": "user", "content": asked}]

    @property
    def recorded_prompt(self) -> str:
        """The prompt as a trace records it: a gap in the document shows where it was."""
        if self.kind == "draft" and not (self.before or self.after):
            return self.instruction
        gap = f"{self.before[-200:]}\u2026{self.after[:200]}"
        return f"{self.instruction}\n\n{gap}" if self.instruction.strip() else gap


def routing_request(request: DraftRequest, tokens: int, readable: int, quality: Quality) -> tuple[Request, int]:
    """What the router is asked for a draft, and how many tokens of the document around the cursor it counts
    in the prompt (each diffusion pass reads them again; at most the `readable` tokens a model's context
    leaves beside the draft)."""
    before = min(approximate_tokens(request.before), readable)
    after = min(approximate_tokens(request.after), max(0, readable - before))
    routing = Request(
        kind=request.kind,
        output_tokens=tokens,
        prompt_tokens=approximate_tokens(request.asked) + before,
        suffix_tokens=after,
        force_engine=request.engine,
        forced_because=request.engine_because,
        quality=request.quality or quality,
    )
    return routing, before + after
