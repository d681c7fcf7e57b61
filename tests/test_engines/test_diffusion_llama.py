"""The llama.cpp diffusion backend on tiny real GGUFs (LLaDA, Dream and Sharpen's cacheable form)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import llama_cpp
import numpy as np
import pytest
from conftest import MASK_ID

from engines.cancel import CancelToken
from engines.diffusion import llama_backend
from engines.diffusion.backend import CacheMode
from engines.diffusion.engine import DiffusionEngine
from engines.diffusion.llama_backend import LlamaDiffusionBackend
from engines.diffusion.load_settings import DiffusionLoadSettings
from engines.diffusion.settings import DiffusionSettings
from engines.errors import EmptyPromptError, PromptTooLongError
from engines.events import DiffusionStats, Done, Event, Pass
from models.errors import UnsupportedModel

GREEDY = DiffusionSettings.reference(steps=16, block_length=16)


def drive(events: Iterable[Event]) -> tuple[list[Pass], Done]:
    collected = list(events)
    done = collected[-1]
    assert isinstance(done, Done) and isinstance(done.stats, DiffusionStats)
    return [e for e in collected if isinstance(e, Pass)], done


@pytest.fixture(scope="module")
def llada(tiny_llada_path: Path) -> DiffusionEngine:
    return DiffusionEngine(LlamaDiffusionBackend(tiny_llada_path), "tiny-llada")


@pytest.fixture(scope="module")
def dream(tiny_dream_path: Path) -> DiffusionEngine:
    return DiffusionEngine(LlamaDiffusionBackend(tiny_dream_path), "tiny-dream")


def raw_rows(backend: LlamaDiffusionBackend, tokens: list[int], lo: int, hi: int) -> np.ndarray:
    """Logit rows [lo, hi) of one full non-causal decode, straight from llama.cpp."""
    backend.reset()
    return backend._decode(tokens, 0, lo, hi)


def test_metadata_is_honoured(llada: DiffusionEngine, dream: DiffusionEngine) -> None:
    assert isinstance(llada.backend, LlamaDiffusionBackend) and isinstance(dream.backend, LlamaDiffusionBackend)
    assert llada.backend.mask_token_id == MASK_ID == dream.backend.mask_token_id
    assert llada.backend.shift == 0 and dream.backend.shift == 1
    assert llada.backend.cache_mode == "none", "llama.cpp builds its diffusion architectures without a KV cache"
    assert 2 in llada.backend.eos_token_ids  # <|im_end|>
    passes, _ = drive(llada.draft("Write a note.", 16, GREEDY))
    assert passes[0].canvas.count(MASK_ID) == 15 and passes[0].masked.count(True) == 15


@pytest.mark.parametrize("engine_name", ["llada", "dream"])
def test_logit_rows_line_up_with_positions(engine_name: str, request: pytest.FixtureRequest) -> None:
    engine: DiffusionEngine = request.getfixturevalue(engine_name)
    backend = engine.backend
    assert isinstance(backend, LlamaDiffusionBackend)
    tokens = engine.draft_prompt("Hello there", 8).prompt + [MASK_ID] * 8
    start = len(tokens) - 8
    rows = backend.logits(np.array(tokens), start, start + 8, start)
    shift = backend.shift
    assert np.array_equal(rows, raw_rows(backend, tokens, start - shift, start + 8 - shift))


def test_attention_is_bidirectional(llada: DiffusionEngine) -> None:
    tokens = llada.draft_prompt("Hello there", 8).prompt + [MASK_ID] * 8
    before = llada.backend.logits(np.array(tokens), 2, 3, 0)
    tokens[-1] = 300
    after = llada.backend.logits(np.array(tokens), 2, 3, 0)
    assert not np.allclose(before, after), "an early position must see a later token"


def test_seeded_drafts_repeat_exactly(llada: DiffusionEngine) -> None:
    sampled = DiffusionSettings.reference(steps=8, block_length=8, temperature=0.9, top_k=50, seed=4)
    first = drive(llada.draft("Write a poem.", 16, sampled))
    second = drive(llada.draft("Write a poem.", 16, sampled))
    other = drive(llada.draft("Write a poem.", 16, DiffusionSettings.reference(**{**sampled.as_dict(), "seed": 5})))
    assert [p.canvas for p in first[0]] == [p.canvas for p in second[0]]
    assert first[1].text == second[1].text != other[1].text


def test_threshold_takes_fewer_passes_than_fixed_steps(confident_llada_path: Path) -> None:
    engine = DiffusionEngine(LlamaDiffusionBackend(confident_llada_path), "confident")
    _, fixed = drive(engine.draft("Hello", 32, DiffusionSettings.reference(steps=32, block_length=16)))
    _, adaptive = drive(engine.draft("Hello", 32, DiffusionSettings.reference(threshold=0.9, block_length=16)))
    assert isinstance(fixed.stats, DiffusionStats) and isinstance(adaptive.stats, DiffusionStats)
    assert fixed.stats.passes == 32
    assert adaptive.stats.passes == 2  # one pass per block: everything is confident
    assert adaptive.text == fixed.text == " the" * 32


def test_blocks_commit_left_to_right_on_a_real_model(llada: DiffusionEngine) -> None:
    passes, _done = drive(llada.draft("Write a note.", 32, DiffusionSettings.reference(steps=8, block_length=8)))
    assert [p.window for p in passes[::2]] == [(0, 8), (8, 16), (16, 24), (24, 32)]
    for p in passes:
        assert all(p.window[0] <= c < p.window[1] for c in p.committed)
        assert not any(p.masked[: p.window[0]]) and all(p.masked[p.window[1] :])
    stables = [p.stable_prefix for p in passes]
    assert stables == sorted(stables)


def test_infill_conditions_on_both_sides_and_keeps_them(llada: DiffusionEngine) -> None:
    backend = llada.backend
    layout = llada.infill_prompt("Dear Sam,", " Best wishes, Ana", 12)
    seen: list[np.ndarray] = []
    original = backend.logits

    def spy(sequence: np.ndarray, start: int, end: int, stable: int) -> np.ndarray:
        seen.append(sequence.copy())
        return original(sequence, start, end, stable)

    backend.logits = spy  # type: ignore[method-assign]  # a spy on the backend, deleted below
    try:
        _, done = drive(llada.infill("Dear Sam,", " Best wishes, Ana", 12, GREEDY))
        _, other = drive(llada.infill("Dear Sam,", " Kind regards from all of us", 12, GREEDY))
    finally:
        del backend.logits
    assert isinstance(done.stats, DiffusionStats)
    first_run = seen[: done.stats.passes]
    n_prompt, n_suffix = len(layout.prompt), len(layout.suffix)
    for sequence in first_run:
        assert list(sequence[:n_prompt]) == layout.prompt
        assert list(sequence[n_prompt + 12 :]) == layout.suffix and n_suffix > 0
    assert done.text != other.text, "the text after the gap changes the infill"


def test_cancel_stops_within_one_pass(llada: DiffusionEngine) -> None:
    cancel = CancelToken()
    events = []
    for event in llada.draft(
        "Write a note.", 32, DiffusionSettings.reference(steps=32, block_length=32), cancel=cancel
    ):
        events.append(event)
        if isinstance(event, Pass):
            cancel.cancel()
    assert len(events) == 2 and isinstance(events[-1], Done)
    assert events[-1].stats.finish_reason == "cancelled"


@pytest.mark.parametrize("mode", ["prefix", "dual"])
def test_caches_decode_less_and_full_path_matches_llada(
    tiny_cacheable_path: Path, tiny_llada_path: Path, mode: CacheMode
) -> None:
    cached = LlamaDiffusionBackend(tiny_cacheable_path, DiffusionLoadSettings(cache=mode))
    full = LlamaDiffusionBackend(tiny_cacheable_path, DiffusionLoadSettings(cache="none"))
    llada = LlamaDiffusionBackend(tiny_llada_path)
    assert cached.cache_mode == mode and cached.cache_note == "" and full.cache_mode == "none"
    tokens = np.array(DiffusionEngine(full, "x").draft_prompt("Write a note.", 64).prompt + [MASK_ID] * 64)
    p = len(tokens) - 64
    # The same weights as a llama-architecture file with causal = false compute what LLaDA computes.
    full.reset()
    llada.reset()
    assert np.allclose(full.logits(tokens, p, p + 16, p), llada.logits(tokens, p, p + 16, p), atol=1e-4)

    decoded: list[int] = []
    original = cached._decode

    def counting(tokens: list[int], position: int, row_lo: int | None, row_hi: int | None, **kw: Any) -> np.ndarray:
        decoded.append(len(tokens))
        return original(tokens, position, row_lo, row_hi, **kw)

    cached._decode = counting  # type: ignore[method-assign]  # counts the tokens each decode evaluates
    engine = DiffusionEngine(cached, "cached")
    settings = DiffusionSettings.reference(steps=16, block_length=16)
    passes, done = drive(engine.sampler.generate(list(tokens[:p]), 64, settings))
    assert len(passes) == 16 and isinstance(done.stats, DiffusionStats) and done.stats.cache == mode
    # A block's first pass decodes the whole sequence. Then the prefix cache decodes from the block to
    # the end (the tail of masks included); the dual cache decodes the block alone.
    later = {"prefix": lambda b: len(tokens) - (p + 16 * b), "dual": lambda b: 16}[mode]
    blocks = [[len(tokens), *[later(b)] * 3] for b in range(4)]
    assert decoded == [n for block in blocks for n in block]
    assert cached.full_passes == 4 and cached.cached_passes == 12


def test_dual_cache_falls_back_to_prefix_on_a_llama_cpp_without_the_patch(
    tiny_cacheable_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A llama.cpp built without scripts/llama-cpp-patches refuses the probe's batch; this one is built with
    it, so the refusal is stood in for here."""
    monkeypatch.setattr(LlamaDiffusionBackend, "_fills_gaps", lambda self: False)
    monkeypatch.setattr(llama_backend._Build, "fills_gaps", None)  # what the stand-in probe records is undone
    backend = LlamaDiffusionBackend(tiny_cacheable_path, DiffusionLoadSettings(cache="dual"))
    assert backend.cache_mode == "prefix"
    assert "lacks Sharpen's patch" in backend.cache_note
    # What routing estimates with from then on, without loading a model of its own.
    assert llama_backend.runnable_cache("dual") == "prefix" and llama_backend.runnable_cache("none") == "none"


def test_the_probe_is_refused_where_causal_attention_keeps_the_check(tiny_cacheable_path: Path) -> None:
    """The patch lifts llama.cpp's consecutive-positions check for non-causal batches only."""
    backend = LlamaDiffusionBackend(tiny_cacheable_path, DiffusionLoadSettings(cache="dual"))
    assert backend._fills_gaps()
    llama_cpp.llama_set_causal_attn(backend._ctx.ctx, True)
    try:
        assert not backend._fills_gaps()
    finally:
        llama_cpp.llama_set_causal_attn(backend._ctx.ctx, False)


def test_wrong_models_and_requests(embedded_model_path: Path, llada: DiffusionEngine) -> None:
    with pytest.raises(UnsupportedModel, match="not a diffusion model: it has no mask token"):
        LlamaDiffusionBackend(embedded_model_path)
    with pytest.raises(EmptyPromptError):
        drive(llada.draft("  ", 8, GREEDY))
    with pytest.raises(PromptTooLongError, match=r"diffusion\.n_ctx"):
        drive(llada.draft("Hello", 5000, DiffusionSettings.reference(steps=5000)))


def test_causal_llama_with_a_mask_is_refused(model_dir: Path) -> None:
    from fixture_models import write_tiny_model

    path = write_tiny_model(model_dir / "causal-with-mask.gguf", mask_token_id=MASK_ID, with_tensors=False)
    with pytest.raises(UnsupportedModel, match="its attention is causal"):
        LlamaDiffusionBackend(path)
