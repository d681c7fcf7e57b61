"""The settled text of a diffusion draft as it grows, and stop strings applied to it."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace

from engines.cancel import CancelToken
from engines.events import Done, Pass
from engines.stops import first_stop

Decode = Callable[[Sequence[int]], str]


def settled_text(event: Pass, decode: Decode) -> str:
    """The text of a pass's stable prefix, decoded as one. A token's own piece can differ from its share of
    the decoded whole (a character split across tokens), and a partial character at the end is left out
    until its last byte settles, so each pass's settled text starts with the one before and the final text
    starts with all of them."""
    return decode(event.canvas[: event.stable_prefix]).rstrip("\ufffd")


def stopping_at(
    events: Iterator[Pass | Done], stop: Sequence[str], decode: Decode, own: CancelToken
) -> Iterator[Pass | Done]:
    """Stop a draft once a stop string has settled: the passes left are cancelled through `own` (the token
    the engine was given) and the text ends before the stop string, with finish reason "stop"."""
    for event in events:
        if isinstance(event, Pass):
            if not own.cancelled and first_stop(settled_text(event, decode), stop) is not None:
                own.cancel()
            yield event
            continue
        cut = first_stop(event.text, stop)
        if cut is not None and (own.cancelled_here or event.stats.finish_reason != "cancelled"):
            event = Done(event.text[:cut], replace(event.stats, finish_reason="stop"))
        yield event
