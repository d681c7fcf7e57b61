"""Greedy replies to many prompts at once through one llama.cpp context (continuous batching).

On a CPU one stream leaves each weight matrix used once per token; decoding several sequences per pass
reuses it for all of them. For writing training data (the teacher, teacher.py), where throughput matters and
latency does not.
"""

from __future__ import annotations

import ctypes
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import llama_cpp
import numpy as np
from llama_cpp import _internals

from engines.errors import EngineError, InvalidRequestError
from engines.events import FinishReason
from engines.llama_ar import LlamaAREngine
from engines.repeats import NoRepeatNgram
from engines.threads import available_cores


@dataclass(frozen=True)
class BatchedReply:
    index: int  # the prompt's position in the list given
    tokens: list[int]  # without the end-of-generation token
    finish_reason: FinishReason  # "eos" or "length"


@dataclass
class _Slot:
    index: int
    position: int
    tokens: list[int] = field(default_factory=list)
    repeats: NoRepeatNgram | None = None


def greedy_batch(
    engine: LlamaAREngine,
    prompts: Sequence[Sequence[int]],
    max_tokens: int,
    *,
    parallel: int = 8,
    no_repeat_ngram: int = 0,
) -> Iterator[BatchedReply]:
    """Greedy replies to many prompts through the AR engine's model, `parallel` at a time in a context of their
    own, as each finishes; the engine serves nothing else meanwhile (its calls are serialised by its lock)."""
    with engine._lock:
        yield from greedy_replies(
            engine._llama,
            prompts,
            max_tokens,
            parallel=parallel,
            n_threads=engine.settings.n_threads,
            no_repeat_ngram=no_repeat_ngram,
        )


def greedy_replies(
    llama: llama_cpp.Llama,
    prompts: Sequence[Sequence[int]],
    max_tokens: int,
    *,
    parallel: int = 8,
    n_threads: int = 0,
    no_repeat_ngram: int = 0,
) -> Iterator[BatchedReply]:
    """Yield the greedy (argmax) reply to each prompt as it finishes, `parallel` sequences at a time;
    `no_repeat_ngram` n > 1: no reply generates a run of n tokens twice (engines/repeats.py)."""
    if max_tokens < 1 or parallel < 1:
        raise InvalidRequestError("max_tokens and parallel must be at least 1")
    if not prompts:
        return
    longest = max(len(p) for p in prompts)
    if min(len(p) for p in prompts) == 0:
        raise InvalidRequestError("every prompt needs at least one token")
    per_sequence = longest + max_tokens
    if per_sequence > llama._model.n_ctx_train():
        raise InvalidRequestError(f"{per_sequence} tokens per sequence exceed the model's context")
    params = llama_cpp.llama_context_default_params()
    params.n_ctx = parallel * per_sequence
    params.n_batch = params.n_ubatch = max(parallel, min(512, longest))
    params.n_seq_max = parallel
    params.kv_unified = False
    params.n_threads = params.n_threads_batch = n_threads or available_cores()
    context = _internals.LlamaContext(model=llama._model, params=params, verbose=False)
    try:
        yield from _run(llama, context, prompts, max_tokens, parallel, int(params.n_batch), no_repeat_ngram)
    finally:
        context.close()


def _run(
    llama: llama_cpp.Llama,
    context: _internals.LlamaContext,
    prompts: Sequence[Sequence[int]],
    max_tokens: int,
    parallel: int,
    n_batch: int,
    no_repeat_ngram: int,
) -> Iterator[BatchedReply]:
    vocab = llama._model.vocab
    n_vocab = llama.n_vocab()
    memory = llama_cpp.llama_get_memory(context.ctx)
    batch = _internals.LlamaBatch(n_tokens=n_batch, embd=0, n_seq_max=1, verbose=False)
    waiting = deque(enumerate(prompts))
    slots: dict[int, _Slot] = {}  # sequence id -> the reply being written in it

    def decode(entries: list[tuple[int, int, int, bool]]) -> None:
        """entries: (token, position, sequence id, wants logits)."""
        raw = batch.batch
        raw.n_tokens = len(entries)
        for i, (token, position, sequence, wants) in enumerate(entries):
            raw.token[i], raw.pos[i], raw.n_seq_id[i], raw.logits[i] = token, position, 1, wants
            raw.seq_id[i][0] = sequence
        if (code := llama_cpp.llama_decode(context.ctx, raw)) != 0:
            raise EngineError(f"llama.cpp failed to decode a batch of {len(entries)} tokens (code {code})")

    def next_token(row: int, slot: _Slot) -> int:
        pointer = llama_cpp.llama_get_logits_ith(context.ctx, row)
        logits = np.ctypeslib.as_array(ctypes.cast(pointer, ctypes.POINTER(ctypes.c_float)), shape=(n_vocab,))
        if slot.repeats is not None:
            logits = slot.repeats(np.asarray(slot.tokens, dtype=np.intc), logits.copy())
        return int(np.argmax(logits))

    def advance(sequence: int, token: int) -> BatchedReply | None:
        """Record `token` for `sequence`; the finished reply, if this token ends it."""
        slot = slots[sequence]
        ended = bool(llama_cpp.llama_vocab_is_eog(vocab, token))
        if not ended:
            slot.tokens.append(token)
        if ended or len(slot.tokens) >= max_tokens:
            del slots[sequence]
            llama_cpp.llama_memory_seq_rm(memory, sequence, -1, -1)
            return BatchedReply(slot.index, slot.tokens, "eos" if ended else "length")
        return None

    while waiting or slots:
        for sequence in range(parallel):
            if sequence in slots or not waiting:
                continue
            index, prompt = waiting.popleft()
            repeats = NoRepeatNgram(no_repeat_ngram, 0) if no_repeat_ngram > 1 else None
            slots[sequence] = _Slot(index, len(prompt), repeats=repeats)
            for start in range(0, len(prompt), n_batch):
                chunk = prompt[start : start + n_batch]
                last = start + len(chunk) == len(prompt)
                decode([(t, start + i, sequence, last and i == len(chunk) - 1) for i, t in enumerate(chunk)])
            # The prompt's last token was the last row of the last chunk decoded.
            if (reply := advance(sequence, next_token(len(chunk) - 1, slots[sequence]))) is not None:
                yield reply
        active = sorted(slots)
        if not active:
            continue
        decode([(slots[s].tokens[-1], slots[s].position + len(slots[s].tokens) - 1, s, True) for s in active])
        for row, sequence in enumerate(active):
            if (reply := advance(sequence, next_token(row, slots[sequence]))) is not None:
                yield reply
