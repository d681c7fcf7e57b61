"""Block-causal decoding (diffusion.cache = "block") equals its definition: full re-decoding of the whole
sequence under an explicit block-causal mask (torch, `block_causal_mask`), pass for pass, on both
backends, for a model that predicts in place (LLaDA's layout) and one that shifts its logits (Dream's).

The reference backend below is the definition written out: every pass runs every position up to the
window's end from scratch, each query seeing its own aligned block and the blocks before it. Sharpen's
backends instead write each settled block's keys and values once (a clean pass, or rows riding along
with the next block's first pass, kept from seeing it) and decode only the current block; if that were
not exact, greedy canvases would part and the logits would differ by far
more than float rounding.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from fixture_checkpoints import MASK_ID, random_weights, write_checkpoint
from fixture_models import write_tiny_model

from engines.diffusion.backend import CacheMode
from engines.diffusion.engine import DiffusionEngine
from engines.diffusion.hf.backend import TorchDiffusionBackend
from engines.diffusion.llama_backend import REFINED, SETTLED, LlamaDiffusionBackend, _Build, kv_type_for
from engines.diffusion.load_settings import DiffusionLoadSettings
from engines.diffusion.sampler import block_bounds
from engines.diffusion.settings import DiffusionSettings
from engines.events import DiffusionStats, Done, Pass
from models.layouts import to_gguf
from models.transformer import block_causal_mask

INSTRUCTION = "Write a short note to Sam about the 3 meetings on Friday."
BEFORE = "Dear Sam,\n\nThanks for the agenda."


class MaskedReference:
    """Block-causal attention by definition: each pass re-decodes positions [0, end) of the sequence in
    full under `block_causal_mask`; the rows asked for are read off (shifted where the model shifts)."""

    def __init__(self, backend: TorchDiffusionBackend) -> None:
        self.inner = backend
        self.mask_token_id, self.eos_token_ids = backend.mask_token_id, backend.eos_token_ids
        self.vocab_size, self.context_length = backend.vocab_size, backend.context_length
        self.backend, self.model_path = "reference", backend.model_path
        self.instruction_tokens, self.tokenize = backend.instruction_tokens, backend.tokenize
        self.piece, self.decode = backend.piece, backend.decode
        self.cache_mode: CacheMode = "block"
        self.block_causal = backend.block_causal
        self.foreground = backend.foreground
        self.block_length = 0
        self.passes = 0

    def reset(self, cache: bool = True, block_length: int = 0, suffix: bool = False) -> CacheMode:
        self.block_length = block_length
        return "block"

    def logits(self, sequence: np.ndarray, start: int, end: int, stable: int) -> np.ndarray:
        model, shift = self.inner.loaded.model, self.inner.shift
        mask = block_causal_mask(end, self.block_length)
        with torch.inference_mode():
            hidden, _ = model(torch.from_numpy(sequence[:end])[None, :], torch.arange(end), None, mask)
            self.passes += 1
            return model.logits(hidden[:, start - shift : end - shift])[0].float().numpy()


class Lockstep:
    """Drives a draft from `ours` while asking the reference the same question at each pass: the largest
    logit difference seen, teacher-forced (one early difference cannot snowball)."""

    def __init__(self, ours: TorchDiffusionBackend | LlamaDiffusionBackend, reference: MaskedReference) -> None:
        self.ours, self.reference = ours, reference
        self.mask_token_id, self.eos_token_ids = ours.mask_token_id, ours.eos_token_ids
        self.vocab_size, self.context_length = ours.vocab_size, ours.context_length
        self.backend, self.model_path = ours.backend, ours.model_path
        self.instruction_tokens, self.tokenize = ours.instruction_tokens, ours.tokenize
        self.piece, self.decode = ours.piece, ours.decode
        self.cache_mode, self.foreground = ours.cache_mode, ours.foreground
        self.block_causal = ours.block_causal
        self.largest_difference = 0.0

    def reset(self, cache: bool = True, block_length: int = 0, suffix: bool = False) -> CacheMode:
        self.reference.reset(cache, block_length, suffix)
        return self.ours.reset(cache, block_length, suffix)

    def logits(self, sequence: np.ndarray, start: int, end: int, stable: int) -> np.ndarray:
        answer = self.ours.logits(sequence, start, end, stable)
        expected = self.reference.logits(sequence, start, end, stable)
        self.largest_difference = max(self.largest_difference, float(np.abs(answer - expected).max()))
        return answer


def canvases(backend: object, length: int, settings: DiffusionSettings, before: str = "") -> list[list[int]]:
    engine = DiffusionEngine(backend, "block")  # type: ignore[arg-type]  # any backend of the protocol
    events = list(engine.draft(INSTRUCTION, length, settings, before=before))
    done = events[-1]
    assert isinstance(done, Done) and isinstance(done.stats, DiffusionStats)
    assert done.stats.cache == "block"
    return [list(e.canvas) for e in events if isinstance(e, Pass)]


def torch_pair(tmp_path: Path, architecture: str, seed: int) -> tuple[TorchDiffusionBackend, MaskedReference, Path]:
    weights = random_weights(architecture, seed=seed)
    folder = write_checkpoint(tmp_path / f"{architecture}-{seed}", architecture, weights=weights)
    ours = TorchDiffusionBackend(folder, DiffusionLoadSettings(cache="block", n_ctx=512))
    reference = MaskedReference(TorchDiffusionBackend(folder, DiffusionLoadSettings(cache="none", n_ctx=512)))
    kv_heads = 2 if architecture == "dream" else 4
    # The cacheable form of the same weights (as the twins are): an AR architecture with causal attention
    # off, llama for LLaDA (q and k rows in ggml's rope layout), qwen2 for Dream.
    twin = "qwen2" if architecture == "dream" else "llama"
    gguf = write_tiny_model(
        tmp_path / f"{architecture}-{seed}.gguf",
        arch=twin,
        causal=False,
        mask_token_id=MASK_ID,
        shift_logits=architecture == "dream",
        tensors=to_gguf(weights, 4, kv_heads, ggml_rope=twin == "llama"),
        kv_heads=kv_heads,
    )
    return ours, reference, gguf


CASES: Sequence[tuple[int, int, int, str]] = (
    # (canvas length, steps, block length, text before the canvas): prompt ends mid-block or on a boundary.
    (32, 16, 8, ""),
    (24, 24, 4, BEFORE),
    (40, 10, 16, BEFORE),
)


@pytest.mark.parametrize("architecture", ["llada", "dream"])
def test_block_causal_equals_the_masked_reference_on_torch_and_llama_cpp(tmp_path: Path, architecture: str) -> None:
    ours, reference, gguf = torch_pair(tmp_path, architecture, seed=4)
    llama = LlamaDiffusionBackend(gguf, DiffusionLoadSettings(n_ctx=512, cache="block"))
    assert llama.cache_mode == "block"
    # And a canvas whose last block holds a single position: with a shift, a pass that decodes one row
    # and predicts none of its own (the position's prediction is the settled block's last row).
    prompt_length = len(ours.instruction_tokens(INSTRUCTION))
    single = 8 - prompt_length % 8 + 8 + 1
    for length, steps, block, before in (*CASES, (single, single, 8, "")):
        settings = DiffusionSettings.reference(steps=steps, block_length=block, stop_at_eos=False)
        expected = canvases(reference, length, settings, before)
        assert canvases(ours, length, settings, before) == expected, ("torch", length, block)
        assert canvases(llama, length, settings, before) == expected, ("llama.cpp", length, block)
        # llama.cpp keeps f32 keys and values for a model this small (kv_type "auto"): float rounding only.
        for backend in (ours, llama):
            lockstep = Lockstep(backend, reference)
            canvases(lockstep, length, settings, before)
            assert lockstep.largest_difference < 1e-4, (backend.backend, lockstep.largest_difference)
    # Each settled block was written once: clean passes number the aligned blocks before the last window.
    assert ours.clean_passes > 0 and llama.clean_passes == ours.clean_passes


def test_f16_keys_and_values_cost_precision_at_their_stated_tolerance(tmp_path: Path) -> None:
    """llama.cpp's default f16 cache (kv_type "f16", what models of 1B parameters and more get under "auto")
    moves these logits (spread over about ±10) by about 1e-2; f32 by about 2e-5."""
    _, reference, gguf = torch_pair(tmp_path, "dream", seed=4)
    settings = DiffusionSettings.reference(steps=16, block_length=8, stop_at_eos=False)
    differences = {}
    for kv_type in ("f16", "f32"):
        backend = LlamaDiffusionBackend(gguf, DiffusionLoadSettings(n_ctx=512, cache="block", kv_type=kv_type))
        assert backend.kv_type == kv_type
        lockstep = Lockstep(backend, reference)
        canvases(lockstep, 32, settings)
        differences[kv_type] = lockstep.largest_difference
    assert differences["f32"] < 1e-4 < 1e-3 < differences["f16"] < 5e-2, differences


def test_the_key_value_precision_follows_the_model_size() -> None:
    assert kv_type_for("auto", 135_000_000) == "f32" and kv_type_for("auto", 7_000_000_000) == "f16"
    assert kv_type_for("f16", 135_000_000) == "f16" and kv_type_for("f32", 7_000_000_000) == "f32"


def test_a_pass_decodes_only_its_block_and_a_settled_block_is_never_decoded_again(tmp_path: Path) -> None:
    ours, _, _ = torch_pair(tmp_path, "llada", seed=5)
    written: list[tuple[int, int]] = []  # settled positions written to the cache, by clean or riding rows
    refining: list[tuple[int, int]] = []
    rode: list[int] = []  # where a settled block rode along with a window's first pass
    run = ours._run

    def counting(tokens: np.ndarray, lo: int, hi: int, context: object, mask: torch.Tensor | None = None) -> object:
        if MASK_ID not in tokens[lo:hi]:
            written.append((lo, hi))
        else:
            riding = 0 if mask is None else int((~mask).any(dim=1).sum())  # rows kept from the window
            if riding:
                written.append((lo, lo + riding))
                rode.append(lo)
            refining.append((lo + riding, hi))
        return run(tokens, lo, hi, context, mask)  # type: ignore[arg-type]

    ours._run = counting  # type: ignore[method-assign,assignment]
    block, length = 8, 24
    settings = DiffusionSettings.reference(steps=12, block_length=block, stop_at_eos=False)
    engine = DiffusionEngine(ours, "block")
    events = list(engine.draft(INSTRUCTION, length, settings))
    done = events[-1]
    assert isinstance(done, Done) and isinstance(done.stats, DiffusionStats)
    total = len(ours.instruction_tokens(INSTRUCTION)) + length
    last_block = total - 1 - (total - 1) % block
    # Every call decodes within one aligned block (a riding block beside it); each refining call ends
    # where its window ends.
    assert all(lo % block == 0 and hi - lo <= block for lo, hi in written + refining)
    windows = {e.window for e in events if isinstance(e, Pass)}
    offset = total - length
    assert {hi for _, hi in refining} == {offset + hi for _, hi in windows}
    # One refining call per pass; every aligned block before the last written once, never again.
    assert len(refining) == done.stats.passes
    assert sorted(written) == sorted(set(written)) and {lo for lo, _ in written} == set(range(0, last_block, block))
    # The block before each window (before the first, the prompt's last whole block) rode along with the
    # window's first pass, a whole block each time.
    assert len(rode) == len(set(rode)) == len(windows) - 1 + (1 if offset >= block else 0)
    assert all((lo, lo + block) in written for lo in rode)
    assert ours.clean_passes == len(written) and ours.cached_passes == len(refining)


def test_llama_cpp_writes_a_settled_block_in_the_next_windows_first_pass(tmp_path: Path) -> None:
    """One llama.cpp batch holds the settled block (in both sequences) and the next window (REFINED): a
    pass's fixed cost saved per block. The parity test above shows the logits stay exact."""
    _, _, gguf = torch_pair(tmp_path, "dream", seed=7)
    llama = LlamaDiffusionBackend(gguf, DiffusionLoadSettings(n_ctx=512, cache="block"))
    batches: list[tuple[int, int, int]] = []  # (position, tokens, settled among them)
    decode = llama._decode

    def counting(tokens: list[int], position: int, row_lo: int | None, row_hi: int | None, **kw: Any) -> np.ndarray:
        batches.append((position, len(tokens), int(kw.get("shared", 0)) if kw.get("settled_ids") else 0))
        return decode(tokens, position, row_lo, row_hi, **kw)

    llama._decode = counting  # type: ignore[method-assign]
    block, length = 8, 24
    settings = DiffusionSettings.reference(steps=6, block_length=block, stop_at_eos=False)
    passes = canvases(llama, length, settings)
    # This build keeps a settled token from attending to a refined one beside it, given its ids this way.
    assert _Build.settled_ids in ((REFINED, SETTLED), (SETTLED, REFINED))
    prompt = len(llama.instruction_tokens(INSTRUCTION))
    alone = prompt // block - 1  # the prompt's whole blocks but the last, a clean pass each
    windows = len(block_bounds(length, block, offset=prompt))
    assert len(batches) == alone + len(passes)
    riding = [b for b in batches if 0 < b[2] < b[1]]
    assert len(riding) == windows - 1 + min(1, prompt // block)
    assert all(settled == block for _, _, settled in riding)


def test_aligned_blocks_follow_the_prompt() -> None:
    assert block_bounds(10, 4) == [(0, 4), (4, 8), (8, 10)]
    assert block_bounds(10, 4, offset=7) == [(0, 1), (1, 5), (5, 9), (9, 10)]
    assert block_bounds(8, 4, offset=8) == [(0, 4), (4, 8)]


def test_a_draft_with_text_after_it_uses_the_bidirectional_cache_and_says_so(tmp_path: Path) -> None:
    ours, _, _ = torch_pair(tmp_path, "llada", seed=6)
    engine = DiffusionEngine(ours, "block")
    settings = DiffusionSettings.reference(steps=8, block_length=8, stop_at_eos=False)
    done = list(engine.draft(INSTRUCTION, 16, settings, before="Hi Sam,", after="\n\nBest, Ana"))[-1]
    assert isinstance(done, Done) and isinstance(done.stats, DiffusionStats)
    assert done.stats.cache == "dual"
    assert "sees nothing after the block" in done.stats.cache_note and done.stats.uncached_because == ""
