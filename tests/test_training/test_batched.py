"""Greedy replies decoded several at a time (continuous batching) through the real SmolLM2 GGUF."""

from __future__ import annotations

from pathlib import Path

import llama_cpp
import numpy as np
import pytest

from engines.errors import InvalidRequestError
from engines.llama_ar import LlamaAREngine
from training.batched import greedy_batch

INSTRUCTIONS = (
    "Write a short note to a friend about the picnic.",
    "Write an email to my landlord about a broken heating system.",
    "Say hello.",
)


def test_every_reply_is_the_models_argmax_also_in_reused_slots(
    ar_engine: LlamaAREngine, embedded_model_path: Path
) -> None:
    prompts = [ar_engine.chat_prompt(text, 24) for text in INSTRUCTIONS]
    # Two slots for three prompts: the third reuses a slot whose sequence was cleared. Each sequence's
    # rows are computed independently, so decoding them together changes nothing.
    replies = sorted(greedy_batch(ar_engine, prompts, 24, parallel=2), key=lambda r: r.index)
    one_at_a_time = sorted(greedy_batch(ar_engine, prompts, 24, parallel=1), key=lambda r: r.index)
    assert [r.index for r in replies] == [0, 1, 2]
    assert replies == one_at_a_time
    scorer = llama_cpp.Llama(str(embedded_model_path), n_ctx=512, logits_all=True, verbose=False)
    for prompt, reply in zip(prompts, replies, strict=True):
        assert reply.tokens
        assert (reply.finish_reason == "length") == (len(reply.tokens) == 24)
        scorer.reset()
        scorer.eval(prompt + reply.tokens)
        logits = np.array(scorer.scores[len(prompt) - 1 : len(prompt) - 1 + len(reply.tokens)])
        chosen = logits[np.arange(len(reply.tokens)), reply.tokens]
        # Scoring the whole reply in one batch rounds differently from decoding it token by token (up to
        # about 0.2 here), so a near tie may go either way; nothing more.
        assert np.all(chosen >= logits.max(axis=1) - 0.5), ar_engine.detokenize(reply.tokens)


def test_bad_requests_are_refused(ar_engine: LlamaAREngine) -> None:
    with pytest.raises(InvalidRequestError, match="at least one token"):
        list(greedy_batch(ar_engine, [[1, 2], []], 8))
    with pytest.raises(InvalidRequestError, match="at least 1"):
        list(greedy_batch(ar_engine, [[1, 2]], 0))
    assert list(greedy_batch(ar_engine, [], 8)) == []
