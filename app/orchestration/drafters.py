"""Each engine's drafter: it settles its own options for a routed draft (AR: Sampling from the config and the
request; diffusion: the draft settings with the router's passes), lays out its own engine's prompt and fits the
document around the cursor to its own engine's context, as simonw/llm's models own `execute()`.

A drafter turns a request into a Job: nothing runs until the Reply opens it, in the caller's thread; opening
loads the engine, fits the document and starts the engine's stream, and returns what the model was given of
the document with the events.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Protocol, TypeVar

from app.domain.asked_stance import opens_sentence, stance_opener
from app.domain.context import ContextUse, continued_reply, document_instruction, fit_context
from app.domain.draft_check import CheckRecord, DraftChecks, Verdict
from app.domain.draft_request import DraftRequest
from app.domain.job import Job, Opened
from app.domain.sign_off import split_sign_off
from app.orchestration.draft_tries import Tried, best_of_tries
from app.storage.config import Config
from engines.ar_engine import AREngine, Sampling, TrimPolicy, fim_budgets
from engines.cancel import CancelToken
from engines.diffusion.engine import DiffusionEngine
from engines.diffusion.settings import DiffusionSettings
from engines.diffusion.settled import stopping_at
from engines.events import Done, Event, Token
from engines.messages import Instruction
from router.request import Route

# What stands for each side of the document while a prompt's framing is measured (a heading is laid out
# only for a side that has text).
STAND_IN = "."
# A checked draft's tries after the first write at least this share of the length asked before they may end:
# the writing adapter's drafts ended at under half of it, leaving facts out (docs/benchmarks.md). The first
# ends where it ends: a draft that carries everything asked is not padded.
CHECKED_MIN_SHARE = 0.5
# Kept from its end, a chat model may go on into a turn of its own ("Best, Ana\nuser\nHow many..."): a draft
# that runs to a least length ends where one starts.
TURN_STOPS = ("\nuser\n", ".user\n", "!user\n", "?user\n", "\nassistant\n")
# A checked draft's try n is seeded this many times n past its own seed: clear of the seeds the next
# candidates take (the service's candidate n is seeded n past the first).
RETRY_SEED_STEP = 1000
# Sampled drafts (a candidate after the first, a draft tried again) are sampled at this temperature at least:
# a new seed alone changes nothing in greedy decoding.
CANDIDATE_TEMPERATURE = 0.8
# A try that carries a draft on writes at least this many tokens (a clause) before it may end.
CONTINUED_MIN_TOKENS = 6

Prompt = TypeVar("Prompt")


@dataclass(frozen=True)
class ArPrompt:
    """What an AR chat call is given: the conversation, the start of the reply it goes on from, and the white
    space held back from that start (which the reply then begins with, and the document already has)."""

    conversation: Instruction
    reply_start: str = ""
    held_back: str = ""


class Drafter(Protocol):
    """What the service asks of an engine's drafter: a routed draft, with the draft settings it was routed on,
    ready to run."""

    def draft(
        self,
        request: DraftRequest,
        tokens: int,
        route: Route,
        settings: DiffusionSettings,
        cancel: CancelToken | None,
    ) -> Job: ...


def _fitted(
    request: DraftRequest, budget: int, engine: AREngine | DiffusionEngine, after_at_most: int | None = None
) -> ContextUse | None:
    if not request.before and not request.after:
        return None
    return fit_context(request.before, request.after, budget, engine.count_tokens, after_at_most=after_at_most)


def _document_in_request(
    request: DraftRequest,
    room: int,
    layout: Callable[[DraftRequest, str, str], Prompt],
    measure: Callable[[Prompt], int],
    count: Callable[[str], int],
) -> tuple[Prompt, ContextUse]:
    """The request with the document laid into it by `layout`, the document fitted to the `room` its prompt
    leaves: what the prompt holds besides the document (the template, the history, the request and the
    headings) is measured once, laid out with stand-ins for the document's two sides."""
    framing = measure(layout(request, STAND_IN, STAND_IN))
    context = fit_context(request.before, request.after, room - framing, count)
    return layout(request, context.before, context.after), context


def _sampling(
    configured: float,
    temperature: float | None,
    top_p: float | None = None,
    seed: int | None = None,
    no_repeat_ngram: int = 0,
) -> Sampling:
    """AR sampling at the configured temperature unless one is given, with the top_p and seed given."""
    chosen = Sampling(
        temperature=configured if temperature is None else temperature, seed=seed, no_repeat_ngram=no_repeat_ngram
    )
    return chosen if top_p is None else replace(chosen, top_p=top_p)


class ArDrafter:
    """The AR engine's prompts: completions (fill-in-the-middle where the model has it), chat replies, and
    drafts into a document."""

    def __init__(self, engine: Callable[[], AREngine], config: Callable[[], Config]) -> None:
        self.engine = engine
        self.config = config

    def completion(
        self,
        prefix: str,
        suffix: str | None,
        tokens: int,
        cancel: CancelToken | None,
        *,
        stop: Sequence[str] = (),
        trim: TrimPolicy = "left",
        temperature: float | None = None,
        top_p: float | None = None,
        seed: int | None = None,
    ) -> Job:
        """A continuation of `prefix`, sampled as [complete] configures unless the call says otherwise."""
        sampling = _sampling(self.config().complete.temperature, temperature, top_p, seed)

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
        cancel: CancelToken | None,
        stop: Sequence[str] = (),
        *,
        temperature: float | None = None,
        top_p: float | None = None,
        seed: int | None = None,
    ) -> Job:
        """A chat reply, sampled as [chat] configures unless the call says otherwise."""
        chat = self.config().chat
        sampling = _sampling(chat.temperature, temperature, top_p, seed, chat.no_repeat_ngram)

        def start() -> Opened:
            engine = self.engine()
            events = engine.chat(instruction, max_tokens=tokens, stop=tuple(stop), sampling=sampling, cancel=cancel)
            return Opened(events, engine)

        return Job(tokens, start)

    def draft(
        self,
        request: DraftRequest,
        tokens: int,
        route: Route,
        settings: DiffusionSettings,
        cancel: CancelToken | None,
    ) -> Job:
        """A draft sampled as a chat reply where the request asks for something, as a completion where it does
        not, with the request's own temperature, top_p and seed (the route and the diffusion settings are the
        diffusion drafter's)."""
        config, given = self.config(), request.given_options
        sampling = _sampling(
            config.chat.temperature if request.asked else config.complete.temperature,
            given.get("temperature"),
            given.get("top_p"),
            given.get("seed"),
            config.chat.no_repeat_ngram,
        )
        asked = request.kind == "draft" and request.asked
        checks = DraftChecks.of(request.instruction, request.before + "\n" + request.after) if asked else None
        if checks is None or not checks.checks_anything:
            return Job(tokens, lambda: self._open_draft(request, tokens, sampling, cancel))
        return Job(tokens, lambda: self._open_checked(request, tokens, sampling, cancel, checks))

    @staticmethod
    def document_prompt(request: DraftRequest, before: str, after: str) -> ArPrompt:
        """An AR draft into a document, laid out as a reply that goes on from the document: the request (and
        the text after the cursor) in the user's turn, the document up to the cursor as the reply's start.
        Measured on bench/faithful_drafts.py against the request with the document under headings: more of
        the asked facts and stances kept, far less copied back (docs/benchmarks.md)."""
        laid_out = continued_reply(request.asked, before, after)
        return ArPrompt(request.conversation(laid_out.request), laid_out.reply_start, laid_out.held_back)

    @staticmethod
    def headed_prompt(request: DraftRequest, before: str, after: str) -> ArPrompt:
        """An AR draft into a document for an engine that cannot be given the start of its reply (a remote
        one): the document goes into the request under headings."""
        return ArPrompt(request.conversation(document_instruction(request.asked, before, after)))

    def _open_checked(
        self,
        request: DraftRequest,
        tokens: int,
        sampling: Sampling,
        cancel: CancelToken | None,
        checks: DraftChecks,
    ) -> Opened:
        """A draft checked against what its instruction asks, drafted again while it fails, up to
        chat.fact_tries drafts: the best is kept (app/orchestration/draft_tries.py). The tries after the first
        write at least CHECKED_MIN_SHARE of the length asked, are told what the best so far left out, and, where
        it missed the stance, open with words that take it; the third on are sampled, each with its own seed."""
        chat = self.config().chat
        tries = chat.fact_tries
        if tries > 1:
            request = replace(request, stop=(*request.stop, *TURN_STOPS))
        first, record = self._open_draft(request, tokens, sampling, cancel), CheckRecord()
        # The tries after the first run to a share of the length asked: drafts that ended early left facts out.
        at_least = replace(sampling, min_tokens=int(tokens * CHECKED_MIN_SHARE))
        # Into a document, where the cursor starts a sentence, a try after one that missed the stance asked
        # opens with words that take it.
        into_document = bool(request.before or request.after) and opens_sentence(request.before)
        opener = stance_opener(checks.stances) if into_document else ""
        carried_on: set[str] = set()

        def draft(number: int, best: Tried | None) -> Iterator[Event]:
            if number == 0:  # as configured, ending where it ends: kept if it passes
                return first.events
            verdict = best.verdict if best is not None else None
            asked = with_reminder(request, verdict) if verdict is not None else request
            body, sign_off = continuable(best) if chat.continue_drafts else ("", "")
            # Once per draft: greedy, it would go on the same way again.
            if best is not None and body and body not in carried_on:
                carried_on.add(body)
                written = sum(isinstance(event, Token) for event in best.events)
                left = max(tokens - written, CONTINUED_MIN_TOKENS * 4)
                going_on = replace(sampling, min_tokens=CONTINUED_MIN_TOKENS)
                carried = self._open_draft(asked, left, going_on, cancel, continued=body).events
                return with_sign_off(carried, body, sign_off)
            chosen = at_least  # the second: greedy, as the first
            if number > 1:
                chosen = replace(
                    at_least,
                    temperature=max(sampling.temperature, CANDIDATE_TEMPERATURE),
                    seed=(sampling.seed or 0) + RETRY_SEED_STEP * number,
                )
            stance_missed = verdict is not None and (verdict.turned_around or bool(verdict.stances_missing))
            return self._open_draft(asked, tokens, chosen, cancel, opener if stance_missed else "").events

        events = best_of_tries(draft, checks, tries, record)
        return Opened(events, first.engine, first.context, record)

    def _open_draft(
        self,
        request: DraftRequest,
        tokens: int,
        sampling: Sampling,
        cancel: CancelToken | None,
        opener: str = "",
        continued: str = "",
    ) -> Opened:
        """A draft; into a document, one that starts with `opener` where that is given (its first token); one
        that carries on from `continued` (a draft's text, as written after the cursor) where that is given."""
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
        prompt: ArPrompt
        if request.kind == "draft" and (request.before or request.after):
            # What is written after the document (a draft carried on, an opener) takes room from it too.
            lead_room = engine.count_tokens(continued or opener) + 1 if continued or opener else 0
            prompt, context = _document_in_request(
                request,
                engine.context_length - tokens - lead_room,
                self.document_prompt if engine.continues_replies else self.headed_prompt,
                lambda laid_out: engine.chat_prompt_length(laid_out.conversation, laid_out.reply_start),
                engine.count_tokens,
            )
        else:
            prompt, context = ArPrompt(request.conversation()), None
        lead = continued
        if opener and prompt.reply_start and not continued:
            lead = opener if prompt.held_back else " " + opener
        if lead:  # the held-back white space is written before it: the reply goes on from the lead
            prompt = ArPrompt(prompt.conversation, prompt.reply_start + prompt.held_back + lead)
        events = engine.chat(
            prompt.conversation,
            max_tokens=tokens,
            stop=stop,
            sampling=sampling,
            cancel=cancel,
            reply_start=prompt.reply_start,
        )
        if prompt.held_back and not lead:
            events = _after_held_back(events, prompt.held_back)
        return Opened(_led_by(events, lead) if lead else events, engine, context)


def continuable(best: Tried | None) -> tuple[str, str]:
    """(body, sign-off) of the best draft so far, where a try may carry its body on (told what it left out)
    rather than start again: a draft of its own that takes the stances asked and leaves facts or content words
    out. ("", "") where it may not."""
    if best is None or best.verdict.passed or best.verdict.rank[:3] != (1, 1, 0):
        return "", ""
    if not best.verdict.missing and best.verdict.mentions_enough:
        return "", ""
    return split_sign_off(best.done.text)


def with_sign_off(events: Iterator[Event], body: str, sign_off: str) -> Iterator[Event]:
    """A draft carried on from `body`, with the sign-off the draft had after it where what was written on
    has none of its own (streamed as a last token: the model was not given it)."""
    index = 0
    for event in events:
        if isinstance(event, Token):
            index = event.index + 1
        elif isinstance(event, Done) and sign_off and not split_sign_off(event.text[len(body) :])[1]:
            tail = sign_off.lstrip() if event.text[-1:].isspace() else sign_off
            yield Token(tail, -1, index)
            event = replace(event, text=event.text + tail)
        yield event


def with_reminder(request: DraftRequest, best: Verdict) -> DraftRequest:
    """`request` with what `best` (the best draft so far) left out named after its instruction: the facts,
    and the content words where too few were mentioned. A 135M writer told the words again states more of
    them (bench/faithful_drafts.py's held-out cases: 68% of the facts without, 76% with)."""
    left_out = [fact.said for fact in best.missing]
    if not best.mentions_enough:
        left_out += [topic.said for topic in best.topics_missing]
    if not left_out:
        return request
    return replace(request, instruction=f"{request.instruction.rstrip()} (Be sure to mention: {', '.join(left_out)}.)")


def _led_by(events: Iterator[Event], opener: str) -> Iterator[Event]:
    """A reply's events after `opener`, given as the reply's start: the opener comes first, as a token of its
    own (no id: the model was given it), and the text of the whole draft begins with it."""
    yield Token(opener, -1, 0)
    for event in events:
        if isinstance(event, Token):
            yield replace(event, index=event.index + 1)
        elif isinstance(event, Done):
            yield replace(event, text=opener + event.text)
        else:
            yield event


def _after_held_back(events: Iterator[Event], held_back: str) -> Iterator[Event]:
    """A reply's events less the white space it starts with that the document already has (as much of
    `held_back` as the reply begins with)."""
    left = held_back
    for event in events:
        if isinstance(event, Token) and left:
            common = _common_start(event.text, left)
            left = left[common:] if common == len(event.text) else ""
            if common < len(event.text):
                yield replace(event, text=event.text[common:])
            continue
        yield (
            replace(event, text=event.text[_common_start(event.text, held_back) :])
            if isinstance(event, Done)
            else event
        )


def _common_start(text: str, other: str) -> int:
    length = 0
    while length < min(len(text), len(other)) and text[length] == other[length]:
        length += 1
    return length


class DiffusionDrafter:
    """The diffusion engine's prompts: an instruction's canvas (between the text around the cursor, in a
    document) or an infill between the two sides."""

    def __init__(self, engine: Callable[[], DiffusionEngine]) -> None:
        self.engine = engine

    def draft(
        self,
        request: DraftRequest,
        tokens: int,
        route: Route,
        settings: DiffusionSettings,
        cancel: CancelToken | None,
    ) -> Job:
        """A draft with the router's K passes (scaled by the quality preset), unless the request fixed the steps
        or a confidence threshold decides the passes."""
        chosen = settings
        if "steps" not in request.given_options and settings.threshold is None and route.plan is not None:
            chosen = replace(settings, steps=route.plan.steps)
        return Job(tokens, lambda: self._open_draft(request, tokens, chosen, cancel), chosen)

    @staticmethod
    def document_prompt(request: DraftRequest, before: str, after: str) -> Instruction:
        """A block-causal model's draft into a document, laid out: it never reads past the block it refines, so
        the document goes into the request, as the AR drafter lays it out (and as the drafter was trained to
        read it)."""
        return request.conversation(document_instruction(request.asked, before, after))

    def _open_draft(
        self, request: DraftRequest, tokens: int, settings: DiffusionSettings, cancel: CancelToken | None
    ) -> Opened:
        engine = self.engine()
        own = CancelToken(parent=cancel)  # also stops the passes once a stop string has settled
        context: ContextUse | None
        if request.asked and request.kind == "draft" and engine.block_causal and (request.before or request.after):
            instruction, context = _document_in_request(
                request,
                engine.context_length - tokens,
                self.document_prompt,
                lambda prompt: len(engine.instruction_prompt(prompt, chat=request.chat)),
                engine.count_tokens,
            )
            events = engine.draft(instruction, tokens, settings, chat=request.chat, cancel=own)
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
