"""The remote draft engine's drafter: a routed diffusion draft sent to another machine.

To another `sharpen serve` the request goes as it was asked (the instruction, the conversation, the document
around the cursor, the options the writer set, the quality): the remote lays out its own model's prompt and
fits the document to its own context, as a local draft's drafter does, and streams the passes back. To a
plain OpenAI-compatible server it goes as one chat request with the document under headings (as a remote AR
engine's drafts do), and the text comes back whole.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

from app.domain.context import document_instruction
from app.domain.draft_request import DraftRequest
from app.domain.job import Job, Opened
from app.orchestration.remote_drafts import RemoteDrafts
from engines.cancel import CancelToken
from engines.diffusion.settings import DiffusionSettings
from engines.events import Done, Pass
from engines.messages import ChatMessage
from engines.options import options
from engines.remote_diffusion import OpenAIRemote, RemoteUnavailable, SharpenRemote
from engines.remote_draft import RemoteDraft
from router.request import Quality, Route

# Draft options a request body of /v1/sharpen/drafts has no field for (the chat template is always used there,
# and the trace always comes back).
NOT_SENT = frozenset({"chat", "record_trace"})
SENT_OPTIONS = frozenset(item.name for item in options(DiffusionSettings)) - NOT_SENT


def drafts_body(request: DraftRequest, tokens: int) -> dict[str, Any]:
    """A request as /v1/sharpen/drafts takes it: a draft (`messages`, with the document around the cursor as
    `before` and `after`) or a rewrite (`before`, `after`, the `selection` and its instruction)."""
    chosen = {name: value for name, value in request.given_options.items() if name in SENT_OPTIONS}
    sharpen: dict[str, Any] = {**chosen, "engine": "diffusion"}
    if request.quality is not None:
        sharpen["quality"] = request.quality
    body: dict[str, Any] = {"max_tokens": tokens, "sharpen": sharpen}
    if request.stop:
        body["stop"] = list(request.stop)
    if request.before or request.after or request.kind == "infill":
        body |= {"before": request.before, "after": request.after}
    if request.kind == "infill":
        body |= {"instruction": request.instruction, "selection": request.selection}
    elif request.instruction.strip():
        body["messages"] = [*request.history, {"role": "user", "content": request.instruction}]
    return body


def text_only_messages(request: DraftRequest) -> list[ChatMessage]:
    """A draft as one chat request, for a server that is given no document layout of its own: the document
    around the cursor under headings in the request."""
    asked = request.asked
    if request.before or request.after:
        asked = document_instruction(asked, request.before, request.after)
    conversation = request.conversation(asked)
    return [{"role": "user", "content": conversation}] if isinstance(conversation, str) else list(conversation)


class RemoteDiffusionDrafter:
    def __init__(self, remote: Callable[[], RemoteDrafts], quality: Callable[[], Quality]) -> None:
        self.remote = remote
        # The quality preset the route was estimated with (router.quality, unless the request asks another):
        # the remote settles its passes from it, for its own model.
        self.quality = quality

    def draft(
        self,
        request: DraftRequest,
        tokens: int,
        route: Route,
        settings: DiffusionSettings,
        cancel: CancelToken | None,
    ) -> Job:
        """The request as it was asked: the remote settles its own passes (with the quality asked here)."""
        return Job(tokens, lambda: self._open(request, tokens, route, settings, cancel), settings)

    def _open(
        self, request: DraftRequest, tokens: int, route: Route, settings: DiffusionSettings, cancel: CancelToken | None
    ) -> Opened:
        remote = self.remote()
        client = remote.client
        if isinstance(client, SharpenRemote):
            asked = request if request.quality is not None else replace(request, quality=self.quality())
            draft, events = client.draft(drafts_body(asked, tokens), route.model, cancel)
        else:
            assert isinstance(client, OpenAIRemote)
            draft = RemoteDraft(remote.source, route.model)
            given = request.given_options
            sampling: dict[str, Any] = {name: given[name] for name in ("temperature", "top_p", "seed") if name in given}
            events = client.events(text_only_messages(request), tokens, sampling, request.stop, cancel)
        return Opened(_watched(events, remote), draft)


def _watched(events: Iterator[Pass | Done], remote: RemoteDrafts) -> Iterator[Pass | Done]:
    """The remote's events; a remote that stopped answering is left to this machine's engines for a while, and a
    text-only draft's time per token is what the next is estimated at."""
    try:
        for event in events:
            if isinstance(event, Done) and not remote.animated and event.stats.finish_reason != "cancelled":
                remote.learn(event.stats.total_s, event.stats.generated_tokens)
            yield event
    except RemoteUnavailable as error:
        remote.mark_down(str(error))
        raise
