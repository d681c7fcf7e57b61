"""One draft on another machine's Sharpen, as the reply and its trace see it: the model, the backend, the mask id,
the text of tokens and each pass's settled text, learnt from the draft's events as they arrive (the wire format
is /v1/sharpen/drafts': `pass` events, then `done` with the draft's trace). No HTTP here: the client is
engines/remote_diffusion.py."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from engines.errors import EngineError
from engines.events import DiffusionStats, Done, Pass
from engines.trace import Trace, TraceError, parse_trace
from models.remote import RemoteDraftSource


class RemoteDraft:
    """One draft on a remote Sharpen: what the reply and its trace ask of a diffusion engine (the model, the
    backend, the mask id, the text of tokens, a pass's settled text), learnt as the draft's events arrive."""

    def __init__(self, source: RemoteDraftSource, model_name: str) -> None:
        self.source = source
        self.model_name = model_name
        self.backend_name = source.label
        self.mask_token_id = -1
        # The remote's own trace of the draft (its `done` event), once it has ended.
        self.remote_trace: Trace | None = None
        # The settings the remote drafted with (its trace header's), once it has ended.
        self.settings: dict[str, Any] | None = None
        self._pieces: dict[int, str] = {}
        self._settled: dict[int, str] = {}

    @property
    def animated(self) -> bool:
        return self.source.animated

    def decode(self, tokens: Sequence[int]) -> str:
        """The tokens' text, from the pieces the passes carried (playback's decoding, without the model)."""
        return "".join(self._pieces.get(token, "") for token in tokens)

    def settled(self, event: Pass) -> str:
        """The pass's settled text as the remote decoded it (a character split across tokens decodes whole)."""
        return self._settled.get(event.index, event.stable_text)

    def pass_from(self, body: Mapping[str, Any]) -> Pass:
        canvas = tuple(int(token) for token in body["canvas"])
        masked = tuple(bool(flag) for flag in body["masked"])
        pieces = tuple(str(piece) for piece in body["pieces"])
        for token, piece, mask in zip(canvas, pieces, masked, strict=True):
            if mask:
                self.mask_token_id = token
            else:
                self._pieces.setdefault(token, piece)
        event = Pass(
            index=int(body["index"]),
            canvas=canvas,
            pieces=pieces,
            masked=masked,
            committed=tuple(int(position) for position in body["committed"]),
            confidences=tuple(float(c) for c in body["confidences"]),
            stable_prefix=int(body["stable_prefix"]),
            window=(int(body["window"][0]), int(body["window"][1])),
            elapsed_s=float(body["elapsed_ms"]) / 1000,
            planned_passes=body.get("planned_passes"),
        )
        self._settled[event.index] = str(body.get("settled_text", event.stable_text))
        return event

    def done_from(self, body: Mapping[str, Any]) -> Done:
        """The draft's end: its text, and its stats as the remote's trace keeps them (exact, not rounded)."""
        records = body.get("trace") or []
        try:
            trace = parse_trace("".join(json.dumps(record) + "\n" for record in records), self.source.label)
        except TraceError as error:
            raise EngineError(
                f"the remote draft engine ({self.source.label}) sent a draft without its trace: {error}"
            ) from None
        header = trace.header
        self.remote_trace = trace
        self.settings = dict(header.settings)
        self.mask_token_id = header.mask_token_id
        self.backend_name = f"{header.backend} ({self.source.label})"
        assert isinstance(trace.stats, DiffusionStats), "a diffusion draft's trace"
        return Done(str(body.get("text", trace.text or "")), trace.stats)
