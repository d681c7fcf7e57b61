"""The llama.cpp autoregressive engine: ghost-text completion, fill-in-the-middle and short chat replies."""

from __future__ import annotations

import codecs
import functools
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import llama_cpp

from engines.ar_engine import FIM_TOKENS, GREEDY, Sampling, TrimPolicy, fim_budgets
from engines.cancel import NEVER_CANCELLED, CancelToken
from engines.chat_template import render_instruction
from engines.errors import EmptyPromptError, InvalidRequestError, PromptTooLongError
from engines.events import Done, Event, FinishReason, GenerationStats, Token
from engines.llama_load import ContextShape, KvType, open_llama, use_threads
from engines.messages import Instruction, is_blank
from engines.options import at_least, option
from engines.repeats import NoEndBefore, NoRepeatNgram
from engines.stops import StopScanner
from engines.threads import Foreground, threads_for
from models.errors import UnsupportedModel
from models.gguf_info import GGUFInfo, inspect_gguf

# When a prompt must be cut from the left, the cut moves in steps of this many tokens, so successive
# calls on a growing document keep the same first token and the KV cache stays reusable.
TRIM_STEP = 64


@dataclass(frozen=True)
class LlamaSettings:
    """What the AR model is loaded with. Each option is declared here once: the config's [ar] section is
    this class, so the defaults here are the ones users get."""

    n_ctx: int = option(2048, "context length of the autocomplete engine, in tokens", at_least(256))
    n_threads: int = option(
        0,
        "CPU threads; 0 chooses per call: the cores this process may use, less those other work keeps busy",
        at_least(0),
    )
    n_batch: int = option(512, "prompt tokens evaluated per llama.cpp batch", at_least(1))
    # -1: every layer, where this llama.cpp build can offload at all.
    n_gpu_layers: int = option(
        -1, "layers offloaded to the GPU where the build supports it; -1 all, 0 none", at_least(-1)
    )
    kv_type: KvType = option(
        "f16", "precision of the keys and values llama.cpp caches: f16 (its default) or f32 (exact to float rounding)"
    )
    seed: int = 0


def trim_left(tokens: Sequence[int], budget: int, keep_first: int = 0) -> tuple[list[int], int]:
    """Cut tokens from the left (after the first `keep_first`) until at most `budget` remain.

    The cut is rounded up to a multiple of TRIM_STEP so that it stays put while the text grows.
    Returns the kept tokens and how many were cut.
    """
    excess = len(tokens) - budget
    if excess <= 0:
        return list(tokens), 0
    cut = -(-excess // TRIM_STEP) * TRIM_STEP
    cut = min(cut, len(tokens) - keep_first - 1)
    return list(tokens[:keep_first]) + list(tokens[keep_first + cut :]), cut


class LlamaAREngine:
    """One llama.cpp context over one GGUF model, safe to share between threads (calls are serialised)."""

    backend = "llama.cpp"

    def __init__(
        self,
        model_path: Path,
        model_name: str | None = None,
        settings: LlamaSettings | None = None,
        foreground: Foreground | None = None,
        adapter: Path | None = None,
    ):
        """`foreground`: shared with the session's draft engines, which give way while a completion runs.
        `adapter`: a LoRA adapter GGUF llama.cpp applies to the model at load (models/adapted.py)."""
        self.settings = settings or LlamaSettings()
        self.adapter = adapter
        self.foreground = foreground or Foreground()
        self.model_path = Path(model_path)
        self.model_name = model_name or self.model_path.name
        self.gguf: GGUFInfo = inspect_gguf(self.model_path)
        if self.gguf.is_diffusion:
            raise UnsupportedModel(
                self.model_path,
                f"is a diffusion model ({self.gguf.architecture}); autocomplete needs an autoregressive model",
                "Use it for drafts, and pick a model with role 'complete' for autocomplete.",
            )
        self._lock = threading.Lock()
        self._llama = self._load()
        self._vocab = self._llama._model.vocab

    def _load(self) -> llama_cpp.Llama:
        settings = self.settings
        n_ctx = min(settings.n_ctx, self.gguf.context_length or settings.n_ctx)
        n_batch = min(settings.n_batch, n_ctx)
        shape = ContextShape(
            n_ctx, n_batch, n_batch, settings.n_threads, settings.n_gpu_layers, settings.seed, settings.kv_type
        )
        hint = (
            "Check that the file is a model this llama.cpp build supports, "
            "or pick another with `sharpen config set models.complete NAME`"
        )
        return open_llama(self.gguf, shape, hint, lora=self.adapter)

    def count_tokens(self, text: str) -> int:
        return len(self.tokenize(text, add_bos=False)) if text else 0

    def leading_text(self, text: str, tokens: int) -> str:
        return self.detokenize(self.tokenize(text)[:tokens])

    def forget_cache(self) -> None:
        """Drop the evaluated prefix, as for a new document (calibration and benchmarks measure cold starts)."""
        with self._lock:
            self._llama.reset()

    @property
    def context_length(self) -> int:
        # llama.cpp may round the context up; llama-cpp-python's token buffer keeps the size asked for.
        return min(self._llama.n_ctx(), len(self._llama.input_ids))

    # ----- prompts -------------------------------------------------------------------------------

    def tokenize(self, text: str, *, add_bos: bool = True, special: bool = False) -> list[int]:
        return self._llama.tokenize(text.encode("utf-8"), add_bos=add_bos, special=special)

    def detokenize(self, tokens: Sequence[int], *, special: bool = False) -> str:
        return self._llama.detokenize(list(tokens), special=special).decode("utf-8", errors="replace")

    def completion_prompt(
        self, prefix: str, suffix: str | None, max_tokens: int, trim: TrimPolicy = "left"
    ) -> tuple[list[int], int]:
        """Tokens for a continuation (or fill-in-the-middle where the model declares FIM tokens).

        Returns the tokens and how many prefix tokens were trimmed to fit the context.
        """
        self._check_max_tokens(max_tokens)
        budget = self.context_length - max_tokens
        fim = self.gguf.fim
        if fim is not None and suffix:
            prefix_tokens = self.tokenize(prefix, add_bos=False)
            suffix_tokens = self.tokenize(suffix, add_bos=False)
            # The text nearest the cursor matters most: keep the start of the suffix, the end of the prefix.
            text_budget, suffix_at_most = fim_budgets(budget)
            suffix_tokens = suffix_tokens[:suffix_at_most]
            prefix_budget = text_budget - len(suffix_tokens)
            if trim == "error" and len(prefix_tokens) > prefix_budget:
                length = len(prefix_tokens) + len(suffix_tokens) + FIM_TOKENS
                raise PromptTooLongError(length, max_tokens, self.context_length)
            prefix_tokens, trimmed = trim_left(prefix_tokens, prefix_budget)
            return [fim.prefix, *prefix_tokens, fim.suffix, *suffix_tokens, fim.middle], trimmed
        tokens = self.tokenize(prefix)
        if len(tokens) > budget and trim == "error":
            raise PromptTooLongError(len(tokens), max_tokens, self.context_length)
        has_bos = bool(tokens) and tokens[0] == self.gguf.bos_token_id and self._adds_bos()
        return trim_left(tokens, budget, keep_first=1 if has_bos else 0)

    def chat_prompt(self, instruction: Instruction, max_tokens: int, reply_start: str = "") -> list[int]:
        """The prompt's tokens: the chat template's for `instruction`, then `reply_start`'s, tokenized on its
        own (as the reply's first words are when a model was trained on such replies)."""
        tokens = self._rendered(instruction) + self._reply_start(reply_start)
        self._check_max_tokens(max_tokens)
        if len(tokens) + max_tokens > self.context_length:
            raise PromptTooLongError(len(tokens), max_tokens, self.context_length)
        return tokens

    def chat_prompt_length(self, instruction: Instruction, reply_start: str = "") -> int:
        """Tokens of the chat template's prompt for `instruction` (the template's own words included) and of
        `reply_start`."""
        return len(self._rendered(instruction)) + len(self._reply_start(reply_start))

    @property
    def continues_replies(self) -> bool:
        return True

    def _reply_start(self, text: str) -> list[int]:
        return self.tokenize(text, add_bos=False, special=False) if text else []

    @property
    def fills_middle(self) -> bool:
        """Whether a completion sees the text after the cursor (the model declares FIM tokens)."""
        return self.gguf.fim is not None

    def _rendered(self, instruction: Instruction) -> list[int]:
        template = self.gguf.chat_template
        if template is None:
            raise InvalidRequestError(f"{self.model_path.name} has no chat template, so it cannot follow instructions")
        rendered = render_instruction(
            template,
            instruction,
            bos_text=self._token_text(self.gguf.bos_token_id),
            eos_text=self._token_text(self.gguf.eos_token_id),
        )
        return self.tokenize(rendered.text, add_bos=not rendered.has_bos, special=True)

    def _adds_bos(self) -> bool:
        return bool(llama_cpp.llama_vocab_get_add_bos(self._vocab))

    @functools.cached_property
    def _end_tokens(self) -> list[int]:
        """The vocabulary's end-of-generation tokens (end of text, end of turn)."""
        return [token for token in range(self._llama.n_vocab()) if llama_cpp.llama_vocab_is_eog(self._vocab, token)]

    def _token_text(self, token_id: int | None) -> str:
        if token_id is None:
            return ""
        return self._llama._model.token_get_text(token_id)

    def _check_max_tokens(self, max_tokens: int) -> None:
        if max_tokens < 1:
            raise InvalidRequestError(f"max_tokens must be at least 1, got {max_tokens}")
        if max_tokens >= self.context_length:
            raise InvalidRequestError(
                f"max_tokens {max_tokens} does not fit the context of {self.context_length} tokens"
            )

    # ----- generation ----------------------------------------------------------------------------

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
        """Stream the continuation of `prefix` (filling up to `suffix` where the model supports FIM)."""
        if not prefix.strip() and not (suffix or "").strip():
            raise EmptyPromptError()
        with self._lock, self.foreground.running():
            tokens, trimmed = self.completion_prompt(prefix, suffix, max_tokens, trim)
            yield from self._generate(tokens, trimmed, max_tokens, stop, sampling, cancel or NEVER_CANCELLED)

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
        """Stream the model's reply to an instruction or a conversation, through the model's own chat template;
        with `reply_start`, the reply goes on from that text (which is not streamed)."""
        if is_blank(instruction):
            raise EmptyPromptError()
        with self._lock:
            tokens = self.chat_prompt(instruction, max_tokens, reply_start)
            yield from self._generate(tokens, 0, max_tokens, stop, sampling, cancel or NEVER_CANCELLED)

    def _cached_prefix(self, tokens: Sequence[int]) -> int:
        cached = self._llama._input_ids[: self._llama.n_tokens]
        common = 0
        for a, b in zip(cached, tokens, strict=False):
            if a != b:
                break
            common += 1
        # llama-cpp-python replays the last prompt token to get fresh logits unless the prompt is cached exactly.
        return common - 1 if common == len(tokens) and common != self._llama.n_tokens else common

    def _generate(
        self,
        tokens: list[int],
        trimmed: int,
        max_tokens: int,
        stop: Sequence[str],
        sampling: Sampling,
        cancel: CancelToken,
    ) -> Iterator[Event]:
        start = time.perf_counter()
        use_threads(self._llama, threads_for(self.settings.n_threads))
        reused = self._cached_prefix(tokens)
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        scanner = StopScanner(stop)
        first_token_at: float | None = None
        generated = 0
        finish: FinishReason = "length"
        if cancel.cancelled:
            finish = "cancelled"
        else:
            kept_seed = self._llama._seed
            if sampling.seed is not None:
                self._llama.set_seed(sampling.seed)
            processors: list[NoRepeatNgram | NoEndBefore] = []
            if sampling.no_repeat_ngram > 1:
                processors.append(NoRepeatNgram(sampling.no_repeat_ngram, len(tokens)))
            if sampling.min_tokens > 0:
                processors.append(NoEndBefore(self._end_tokens, len(tokens), sampling.min_tokens))
            rules = llama_cpp.LogitsProcessorList(processors) if processors else None
            stream = self._llama.generate(
                tokens,
                temp=sampling.temperature,
                top_k=sampling.top_k,
                top_p=sampling.top_p,
                min_p=sampling.min_p,
                logits_processor=rules,
            )
            try:
                for token_id in stream:
                    if first_token_at is None:
                        first_token_at = time.perf_counter()
                    if llama_cpp.llama_vocab_is_eog(self._vocab, token_id):
                        finish = "eos"
                        break
                    generated += 1
                    piece, hit_stop = scanner.feed(decoder.decode(self._llama.detokenize([token_id])))
                    if piece:
                        yield Token(text=piece, token_id=token_id, index=generated - 1)
                    if hit_stop:
                        finish = "stop"
                        break
                    if generated >= max_tokens:
                        break
                    if cancel.cancelled:
                        finish = "cancelled"
                        break
            finally:
                stream.close()
                self._llama.set_seed(kept_seed)  # later calls without a seed draw afresh
        if finish in ("length", "eos"):
            tail = scanner.flush() + decoder.decode(b"", final=True)
            if tail:
                yield Token(text=tail, token_id=-1, index=generated)
        end = time.perf_counter()
        yield Done(
            text=scanner.text,
            stats=GenerationStats(
                prompt_tokens=len(tokens),
                reused_tokens=max(reused, 0),
                trimmed_tokens=trimmed,
                generated_tokens=generated,
                time_to_first_token_s=None if first_token_at is None else first_token_at - start,
                total_s=end - start,
                finish_reason=finish,
            ),
        )
