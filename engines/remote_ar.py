"""An autoregressive engine on another machine, through its OpenAI-compatible API (llama-server, vLLM, Sharpen's
own `serve`), with the real `openai` client: completions and chat replies streamed token group by group."""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import openai

from engines.ar_engine import GREEDY, Sampling, TrimPolicy
from engines.cancel import NEVER_CANCELLED, CancelToken
from engines.errors import EmptyPromptError, EngineBusy, EngineError, InvalidRequestError
from engines.events import Done, Event, FinishReason, GenerationStats, Token
from engines.messages import Instruction, as_messages, is_blank
from models.remote import RemoteSource

# Characters per token where the remote tokenizer cannot be asked (OpenAI's API has no tokenize call).
CHARS_PER_TOKEN = 4
# A chat template's markers around each message (role, start and end tokens), generously.
TEMPLATE_TOKENS_PER_MESSAGE = 16


class RemoteAREngine:
    backend = "openai"

    def __init__(
        self, source: RemoteSource, model_name: str, *, api_key: str, context_length: int, timeout_s: float = 600.0
    ) -> None:
        self.source = source
        self.model_name = model_name
        # The server's own limit is not part of OpenAI's API: the configured ar.n_ctx stands for it.
        self._context_length = context_length
        self._client = openai.OpenAI(base_url=source.base_url, api_key=api_key, timeout=timeout_s, max_retries=0)
        self._fresh_prompt = False

    @property
    def context_length(self) -> int:
        return self._context_length

    def count_tokens(self, text: str) -> int:
        return -(-len(text) // CHARS_PER_TOKEN)

    def chat_prompt_length(self, instruction: Instruction, reply_start: str = "") -> int:
        # The server's template is unknown: its role markers, at a few tokens a message.
        messages = as_messages(instruction)
        return sum(self.count_tokens(m["content"]) + TEMPLATE_TOKENS_PER_MESSAGE for m in messages)

    @property
    def continues_replies(self) -> bool:
        # OpenAI's API has no portable way to start the assistant's reply (servers differ on a final
        # assistant message), so drafts lay the document out in the request instead.
        return False

    @property
    def fills_middle(self) -> bool:
        return True  # the suffix is sent; whether the server's model uses it is the server's business

    def leading_text(self, text: str, tokens: int) -> str:
        return text[: tokens * CHARS_PER_TOKEN]

    def forget_cache(self) -> None:
        """A remote server's prompt cache cannot be dropped: the next prompt starts with a random word so that
        it is evaluated afresh (calibration measures cold prompts)."""
        self._fresh_prompt = True

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
    ) -> Iterator[Event]:
        if not prefix.strip() and not (suffix or "").strip():
            raise EmptyPromptError()
        self._check_max_tokens(max_tokens)
        if self._fresh_prompt:
            prefix, self._fresh_prompt = f"{secrets.token_hex(4)} {prefix}", False
        extra: dict[str, Any] = {"suffix": suffix} if suffix else {}
        return self._stream(
            lambda: self._client.completions.create(
                model=self.source.model,
                prompt=prefix,
                max_tokens=max_tokens,
                stream=True,
                stream_options={"include_usage": True},
                **self._sampling(stop, sampling),
                **extra,
            ),
            lambda chunk: chunk.choices[0].text if chunk.choices else "",
            cancel,
        )

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
        if is_blank(instruction):
            raise EmptyPromptError()
        if reply_start:
            raise InvalidRequestError("a remote AR engine cannot be given the start of its reply")
        self._check_max_tokens(max_tokens)
        messages: Any = as_messages(instruction)
        return self._stream(
            lambda: self._client.chat.completions.create(
                model=self.source.model,
                messages=messages,
                max_tokens=max_tokens,
                stream=True,
                stream_options={"include_usage": True},
                **self._sampling(stop, sampling),
            ),
            lambda chunk: (chunk.choices[0].delta.content or "") if chunk.choices else "",
            cancel,
        )

    @staticmethod
    def _sampling(stop: Sequence[str], sampling: Sampling) -> dict[str, Any]:
        chosen: dict[str, Any] = {"temperature": sampling.temperature, "top_p": sampling.top_p}
        if sampling.seed is not None:
            chosen["seed"] = sampling.seed
        if stop:
            chosen["stop"] = list(stop)
        return chosen

    def _check_max_tokens(self, max_tokens: int) -> None:
        if max_tokens < 1:
            raise InvalidRequestError(f"max_tokens must be at least 1, got {max_tokens}")

    def _stream(
        self, open_stream: Callable[[], Any], text_of: Callable[[Any], str], cancel: CancelToken | None
    ) -> Iterator[Event]:
        cancel = cancel or NEVER_CANCELLED
        start = time.perf_counter()
        first_at: float | None = None
        pieces: list[str] = []
        finish: FinishReason = "length"
        usage: Any = None
        try:
            stream = open_stream()
            with stream:
                for chunk in stream:
                    if chunk.usage is not None:
                        usage = chunk.usage
                    piece = text_of(chunk)
                    if piece:
                        first_at = first_at or time.perf_counter()
                        yield Token(text=piece, token_id=-1, index=len(pieces))
                        pieces.append(piece)
                    if chunk.choices and chunk.choices[0].finish_reason:
                        finish = "length" if chunk.choices[0].finish_reason == "length" else "eos"
                    if cancel.cancelled:
                        finish = "cancelled"
                        break  # leaving the `with` closes the connection: the server sees the client go
        except openai.APIStatusError as error:
            raise self._refused(error) from None
        except openai.APIError as error:
            raise EngineError(f"the remote model {self.source.label} did not answer: {error}") from None
        text = "".join(pieces)
        yield Done(
            text=text,
            stats=GenerationStats(
                prompt_tokens=usage.prompt_tokens if usage else 0,
                reused_tokens=0,
                trimmed_tokens=0,
                generated_tokens=usage.completion_tokens if usage else len(pieces),
                time_to_first_token_s=None if first_at is None else first_at - start,
                total_s=time.perf_counter() - start,
                finish_reason=finish,
            ),
        )

    def _refused(self, error: openai.APIStatusError) -> EngineError:
        message = error.message
        body = error.body
        if isinstance(body, dict):
            inner = body.get("error", body)
            message = str(inner.get("message", message)) if isinstance(inner, dict) else message
        if error.status_code == 400:
            return InvalidRequestError(f"the remote model {self.source.label} refused the request: {message}")
        if error.status_code in (429, 503):
            after = error.response.headers.get("retry-after", "")
            return EngineBusy(
                f"the remote model {self.source.label} is busy ({error.status_code}): {message}",
                int(after) if after.isdigit() else None,
            )
        return EngineError(f"the remote model {self.source.label} answered {error.status_code}: {message}")
