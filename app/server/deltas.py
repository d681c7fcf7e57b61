"""A reply's text as deltas that are never taken back: AR tokens as they come, a diffusion draft's settled
text each time it grows (held back where a stop string may be starting), then the rest of the final text."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from app.domain.reply import Reply
from engines.events import Done, Event, Pass, Token
from engines.stops import before_stops


class TextDeltas:
    def __init__(self, reply: Reply, stop: Sequence[str] = ()) -> None:
        self.reply = reply
        self.stop = tuple(s for s in stop if s)
        self.sent = ""

    def feed(self, event: Event) -> str:
        """The text this event adds to what was sent ("" for none)."""
        if isinstance(event, Token):
            text = self.sent + event.text
        elif isinstance(event, Pass):
            text = before_stops(self.reply.settled_text(event), self.stop)
        else:
            assert isinstance(event, Done)
            text = event.text
        if not text.startswith(self.sent):
            if isinstance(event, Done):  # a decoder that tidies the whole text differently: cannot be taken back
                logging.getLogger("sharpen.server").warning(
                    "the final text does not start with the %d characters already streamed", len(self.sent)
                )
            return ""
        if len(text) <= len(self.sent):
            return ""
        delta, self.sent = text[len(self.sent) :], text
        return delta
