"""The llama.cpp AR engine on the real embedded model (SmolLM2-135M-Instruct Q4_1) and tiny real GGUFs."""

from __future__ import annotations

import threading
from collections.abc import Iterable
from pathlib import Path

import pytest

from engines.cancel import CancelToken
from engines.errors import EmptyPromptError, InvalidRequestError, ModelLoadError, PromptTooLongError
from engines.events import Done, Event, GenerationStats, Token
from engines.llama_ar import TRIM_STEP, LlamaAREngine, LlamaSettings, trim_left
from models.errors import MissingModelFile, NotGGUFFile, TruncatedGGUFFile, UnsupportedModel


def run(events: Iterable[Event]) -> tuple[list[Token], Done]:
    collected = list(events)
    tokens = [e for e in collected if isinstance(e, Token)]
    done = collected[-1]
    assert isinstance(done, Done)
    assert all(not isinstance(e, Done) for e in collected[:-1])
    return tokens, done


def test_completion_streams_tokens_that_add_up_to_the_text(ar_engine: LlamaAREngine) -> None:
    tokens, done = run(ar_engine.complete("Dear Sam, thanks for", max_tokens=12))
    assert done.text.strip()
    assert "".join(t.text for t in tokens) == done.text
    assert done.stats.generated_tokens == 12
    assert done.stats.finish_reason == "length"
    assert isinstance(done.stats, GenerationStats)
    assert done.stats.time_to_first_token_s is not None
    assert 0 < done.stats.time_to_first_token_s <= done.stats.total_s


def test_greedy_completion_repeats_exactly(ar_engine: LlamaAREngine) -> None:
    _, first = run(ar_engine.complete("The meeting on Tuesday", max_tokens=10))
    run(ar_engine.complete("Something else entirely.", max_tokens=3))
    _, second = run(ar_engine.complete("The meeting on Tuesday", max_tokens=10))
    assert first.text == second.text


def test_typing_one_more_word_reuses_the_evaluated_prefix(ar_engine: LlamaAREngine) -> None:
    document = "Hi Ana,\n\nI read the draft of the quarterly report this morning and I have a few notes on"
    ar_engine.forget_cache()
    _, cold = run(ar_engine.complete(document, max_tokens=4))
    _, warm = run(ar_engine.complete(document + " the budget", max_tokens=4))
    assert isinstance(cold.stats, GenerationStats) and isinstance(warm.stats, GenerationStats)
    assert cold.stats.reused_tokens == 0
    # Everything but the newly typed words (and at most a re-tokenised last word) came from the cache.
    assert warm.stats.reused_tokens >= warm.stats.prompt_tokens - 3


def test_stop_string_ends_the_completion_and_is_not_shown(ar_engine: LlamaAREngine) -> None:
    _, free = run(ar_engine.complete("Dear Sam, thanks for", max_tokens=32))
    assert "!" in free.text, "the unconstrained continuation is expected to contain '!'"
    tokens, stopped = run(ar_engine.complete("Dear Sam, thanks for", max_tokens=32, stop=["!"]))
    assert stopped.stats.finish_reason == "stop"
    assert stopped.text == free.text[: free.text.index("!")]
    assert "!" not in "".join(t.text for t in tokens)


def test_cancel_stops_between_tokens(ar_engine: LlamaAREngine) -> None:
    cancel = CancelToken()
    seen: list[Token] = []
    done: Done | None = None
    for event in ar_engine.complete("Once upon a time", max_tokens=64, cancel=cancel):
        if isinstance(event, Token):
            seen.append(event)
            if len(seen) == 3:
                cancel.cancel()
        else:
            assert isinstance(event, Done)
            done = event
    assert done is not None
    assert done.stats.finish_reason == "cancelled"
    assert done.stats.generated_tokens == 3
    assert len(seen) == 3


def test_a_cancelled_request_leaves_the_engine_usable(ar_engine: LlamaAREngine) -> None:
    cancel = CancelToken()
    cancel.cancel()
    _, done = run(ar_engine.complete("Hello", max_tokens=8, cancel=cancel))
    assert done.stats.finish_reason == "cancelled" and done.stats.generated_tokens == 0
    _, after = run(ar_engine.complete("Hello", max_tokens=4))
    assert after.stats.generated_tokens == 4


def test_two_threads_never_share_the_context(ar_engine: LlamaAREngine) -> None:
    prompts = ["The weather today is", "My favourite recipe is"]
    expected = {p: run(ar_engine.complete(p, max_tokens=8))[1].text for p in prompts}
    results: list[tuple[str, str]] = []

    def worker(prompt: str) -> None:
        results.append((prompt, run(ar_engine.complete(prompt, max_tokens=8))[1].text))

    threads = [threading.Thread(target=worker, args=(p,)) for p in prompts * 3]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert len(results) == 6
    assert all(text == expected[prompt] for prompt, text in results)


def test_chat_uses_the_model_chat_template(ar_engine: LlamaAREngine) -> None:
    prompt = ar_engine.chat_prompt("Write a thank-you note.", max_tokens=16)
    rendered = ar_engine.detokenize(prompt, special=True)
    assert "<|im_start|>user" in rendered and rendered.rstrip().endswith("<|im_start|>assistant")
    _, done = run(ar_engine.chat("Write a one-sentence thank-you note to Sam.", max_tokens=48))
    assert done.text.strip()
    assert done.stats.finish_reason in ("eos", "length")


def test_long_prompt_is_trimmed_from_the_left_for_completion(embedded_model_path: Path) -> None:
    engine = LlamaAREngine(embedded_model_path, settings=LlamaSettings(n_ctx=256))
    text = " ".join(f"word{i}" for i in range(400))
    _, done = run(engine.complete(text, max_tokens=8))
    assert isinstance(done.stats, GenerationStats)
    assert done.stats.trimmed_tokens > 0
    assert done.stats.trimmed_tokens % TRIM_STEP == 0
    assert done.stats.prompt_tokens + 8 <= engine.context_length
    with pytest.raises(PromptTooLongError, match="more than the context of 256"):
        run(engine.complete(text, max_tokens=8, trim="error"))
    with pytest.raises(PromptTooLongError):
        run(engine.chat(text, max_tokens=8))


def test_trim_cut_stays_put_while_the_text_grows() -> None:
    tokens = list(range(1000))
    kept_a, cut_a = trim_left(tokens, 900)
    kept_b, cut_b = trim_left([*tokens, 1000, 1001], 900)
    assert cut_a == cut_b == TRIM_STEP * 2
    assert kept_a[0] == kept_b[0]
    kept, cut = trim_left(tokens, 900, keep_first=1)
    assert kept[0] == 0 and kept[1] == 1 + cut


def test_empty_prompt_and_bad_lengths_are_refused(ar_engine: LlamaAREngine) -> None:
    with pytest.raises(EmptyPromptError):
        run(ar_engine.complete("   \n", max_tokens=4))
    with pytest.raises(EmptyPromptError):
        run(ar_engine.chat("", max_tokens=4))
    with pytest.raises(InvalidRequestError, match="at least 1"):
        run(ar_engine.complete("Hello", max_tokens=0))
    with pytest.raises(InvalidRequestError, match="does not fit the context"):
        run(ar_engine.complete("Hello", max_tokens=ar_engine.context_length))


def test_fim_prompt_layout_where_the_model_declares_fim_tokens(tiny_fim_path: Path) -> None:
    engine = LlamaAREngine(tiny_fim_path)
    tokens, trimmed = engine.completion_prompt("def add(a, b):", "\n    return c", max_tokens=8)
    before = engine.tokenize("def add(a, b):", add_bos=False)
    after = engine.tokenize("\n    return c", add_bos=False)
    assert tokens == [4, *before, 5, *after, 6] and trimmed == 0
    _, done = run(engine.complete("def add(a, b):", "\n    return c", max_tokens=4))
    assert done.stats.prompt_tokens == len(tokens)


def test_without_fim_tokens_the_suffix_is_ignored(ar_engine: LlamaAREngine) -> None:
    with_suffix, _ = ar_engine.completion_prompt("Dear Sam,", " Best, Ana", max_tokens=8)
    assert with_suffix == ar_engine.tokenize("Dear Sam,")


def test_the_engine_describes_itself(ar_engine: LlamaAREngine) -> None:
    assert ar_engine.backend == "llama.cpp" and ar_engine.model_name == "smollm2-135m-instruct"
    assert ar_engine.context_length == 1024


@pytest.mark.parametrize(
    ("fixture", "error", "message"),
    [
        ("unknown_arch_path", ModelLoadError, "unknown model architecture: 'notarealarch'"),
        ("truncated_path", TruncatedGGUFFile, "is truncated"),
    ],
)
def test_bad_model_files_give_clear_errors(
    request: pytest.FixtureRequest, fixture: str, error: type[Exception], message: str
) -> None:
    path: Path = request.getfixturevalue(fixture)
    with pytest.raises(error, match=message) as raised:
        LlamaAREngine(path)
    assert str(path) in str(raised.value)


def test_missing_and_non_gguf_files(tmp_path: Path) -> None:
    with pytest.raises(MissingModelFile, match="no such file"):
        LlamaAREngine(tmp_path / "absent.gguf")
    text_file = tmp_path / "notes.gguf"
    text_file.write_text("these are my notes, not a model\n")
    with pytest.raises(NotGGUFFile, match="not a GGUF file"):
        LlamaAREngine(text_file)


def test_diffusion_models_are_refused_by_the_ar_engine(model_dir: Path) -> None:
    from fixture_models import write_tiny_model

    path = write_tiny_model(model_dir / "llada-header-only.gguf", arch="llada", mask_token_id=16, with_tensors=False)
    with pytest.raises(UnsupportedModel, match="is a diffusion model"):
        LlamaAREngine(path)
