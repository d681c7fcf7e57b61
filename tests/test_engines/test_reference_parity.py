"""Sharpen computes what the authors' samplers compute: LLaDA's `generate` (semi-autoregressive blocks,
low-confidence remasking), Fast-dLLM's prefix- and dual-cached versions of it, and Dream's
`diffusion_generate` (the timestep schedule, `maskgit_plus`), greedy.

The references below are written from the published algorithms over the raw model of a tiny random
checkpoint: full forward passes of the whole sequence (Fast-dLLM: of the block on, with the kept keys and
values), Dream's logits shifted by one here, not by the backend. Sharpen runs as a user runs it: the
engine on the torch backend (each cache mode) and on llama.cpp with the same weights. The one intentional
difference (docs/diffusion-sampler.md, "Deviations from the references") is that Sharpen never proposes the
mask token; the references leave it out of the softmax too, so the comparison is exact.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from fixture_checkpoints import MASK_ID, export_gguf, random_weights, write_checkpoint

from engines.diffusion.engine import DiffusionEngine
from engines.diffusion.hf.backend import TorchDiffusionBackend
from engines.diffusion.llama_backend import LlamaDiffusionBackend
from engines.diffusion.load_settings import DiffusionLoadSettings
from engines.diffusion.settings import DiffusionSettings
from engines.events import Pass
from models.transformer import LayerKV

INSTRUCTION = "Write a short note to Sam about the 3 meetings on Friday."


def model_logits(backend: TorchDiffusionBackend, sequence: np.ndarray) -> np.ndarray:
    """The raw model's logits for every position of `sequence` (no shift, no cache)."""
    with torch.inference_mode():
        ids = torch.from_numpy(sequence)[None, :]
        hidden, _ = backend.loaded.model(ids, torch.arange(len(sequence)), None)
        return backend.loaded.model.logits(hidden)[0].float().numpy()


def greedy(logits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Token and its probability per row, the mask token left out (Sharpen's stated deviation)."""
    logits = logits.astype(np.float64)
    logits[:, MASK_ID] = -np.inf
    probabilities = np.exp(logits - logits.max(axis=1, keepdims=True))
    probabilities /= probabilities.sum(axis=1, keepdims=True)
    return probabilities.argmax(axis=1), probabilities.max(axis=1)


def llada_generate(
    backend: TorchDiffusionBackend, prompt: list[int], length: int, steps: int, block: int
) -> list[np.ndarray]:
    """LLaDA's generate: blocks left to right, steps // blocks passes each, the block's masks spread evenly
    over them (the remainder first), the most confident masked positions of the block committed."""
    x = np.array([*prompt, *[MASK_ID] * length], dtype=np.int64)
    start, canvases = len(prompt), []
    per_block = steps // (length // block)
    for b in range(length // block):
        lo, hi = start + b * block, start + (b + 1) * block
        masks = int(np.sum(x[lo:hi] == MASK_ID))
        counts = [masks // per_block + (1 if i < masks % per_block else 0) for i in range(per_block)]
        for count in counts:
            tokens, confidence = greedy(model_logits(backend, x))
            confidence = np.where(x == MASK_ID, confidence, -np.inf)
            confidence[hi:] = -np.inf
            chosen = np.argsort(-confidence, kind="stable")[:count]
            x[chosen] = tokens[chosen]
            canvases.append(x[start:].copy())
    return canvases


def fast_dllm_generate(
    backend: TorchDiffusionBackend, prompt: list[int], length: int, steps: int, block: int, *, dual: bool
) -> list[np.ndarray]:
    """Fast-dLLM's generate_with_prefix_cache (dual=False) and _dual_cache: at each block's first step a
    full forward pass, whose keys and values before the block (and, dual, after it) are kept for the
    block's later steps, which run only the block on (dual: only the block)."""
    model = backend.loaded.model
    x = np.array([*prompt, *[MASK_ID] * length], dtype=np.int64)
    start, canvases = len(prompt), []
    per_block = steps // (length // block)
    with torch.inference_mode():
        for b in range(length // block):
            lo, hi = start + b * block, start + (b + 1) * block
            masks = int(np.sum(x[lo:hi] == MASK_ID))
            counts = [masks // per_block + (1 if i < masks % per_block else 0) for i in range(per_block)]
            kept: list[LayerKV] = []
            for step, count in enumerate(counts):
                end = hi if dual else len(x)
                if step == 0:
                    hidden, computed = model(torch.from_numpy(x)[None, :], torch.arange(len(x)), None)
                    logits = model.logits(hidden)[0, lo:end].float().numpy()
                    kept = [
                        LayerKV(
                            torch.cat((kv.keys[:, :, :lo], kv.keys[:, :, end:]), dim=2),
                            torch.cat((kv.values[:, :, :lo], kv.values[:, :, end:]), dim=2),
                        )
                        for kv in computed
                    ]
                else:
                    hidden, _ = model(torch.from_numpy(x[lo:end])[None, :], torch.arange(lo, end), kept)
                    logits = model.logits(hidden)[0].float().numpy()
                tokens, confidence = greedy(logits[: hi - lo])  # the block's rows
                confidence = np.where(x[lo:hi] == MASK_ID, confidence, -np.inf)
                chosen = np.argsort(-confidence, kind="stable")[:count]
                x[lo + chosen] = tokens[chosen]
                canvases.append(x[start:].copy())
    return canvases


def dream_generate(backend: TorchDiffusionBackend, prompt: list[int], length: int, steps: int) -> list[np.ndarray]:
    """Dream's diffusion_generate with maskgit_plus: every step one forward pass, logits shifted so row i
    predicts position i + 1, int(m * (1 - s/t)) of the m masked positions committed (all at the last
    step), t and s from linspace(1, eps, steps + 1). The canvas after each step that committed."""
    x = np.array([*prompt, *[MASK_ID] * length], dtype=np.int64)
    timesteps = torch.linspace(1, 1e-3, steps + 1)
    canvases = []
    for i in range(steps):
        masked = np.flatnonzero(x == MASK_ID)
        logits = model_logits(backend, x)
        logits = np.concatenate([logits[:1], logits[:-1]])
        tokens, confidence = greedy(logits[masked])
        m = torch.tensor(len(masked)) / 1
        count = int(m * (1 - timesteps[i + 1] / timesteps[i])) if i < steps - 1 else len(masked)
        if count:
            chosen = np.argsort(-confidence, kind="stable")[:count]
            x[masked[chosen]] = tokens[chosen]
            canvases.append(x[len(prompt) :].copy())
    return canvases


def sharpen_canvases(backend: object, length: int, settings: DiffusionSettings) -> list[np.ndarray]:
    engine = DiffusionEngine(backend, "parity")  # type: ignore[arg-type]  # a torch or llama.cpp backend
    return [np.array(e.canvas) for e in engine.draft(INSTRUCTION, length, settings) if isinstance(e, Pass)]


def backends(tmp_path: Path, architecture: str, seed: int) -> tuple[TorchDiffusionBackend, dict[str, object]]:
    weights = random_weights(architecture, seed=seed)
    folder = write_checkpoint(tmp_path / f"{architecture}-{seed}", architecture, weights=weights)
    reference = TorchDiffusionBackend(folder, DiffusionLoadSettings(cache="none", n_ctx=512))
    gguf = export_gguf(tmp_path / f"{architecture}-{seed}.gguf", architecture, weights)
    ours: dict[str, object] = {
        f"torch {cache}": TorchDiffusionBackend(folder, DiffusionLoadSettings(cache=cache, n_ctx=512))
        for cache in ("none", "prefix", "dual")
    }
    ours["llama.cpp"] = LlamaDiffusionBackend(gguf, DiffusionLoadSettings(n_ctx=512))
    return reference, ours


@pytest.mark.parametrize("seed", [1, 2])
def test_llada_equals_its_generate_pass_for_pass(tmp_path: Path, seed: int) -> None:
    reference, ours = backends(tmp_path, "llada", seed)
    prompt = reference.instruction_tokens(INSTRUCTION)
    for length, steps, block in ((32, 16, 16), (32, 32, 8), (48, 12, 16)):
        exact = llada_generate(reference, prompt, length, steps, block)
        cached = {
            "torch prefix": fast_dllm_generate(reference, prompt, length, steps, block, dual=False),
            "torch dual": fast_dllm_generate(reference, prompt, length, steps, block, dual=True),
        }
        settings = DiffusionSettings.reference(steps=steps, block_length=block, stop_at_eos=False)
        for name, backend in ours.items():
            got = sharpen_canvases(backend, length, settings)
            # The cached modes approximate full passes, as Fast-dLLM's cached samplers do: they equal those.
            expected = cached.get(name, exact)
            assert [c.tolist() for c in got] == [c.tolist() for c in expected], (name, length, steps, block)


@pytest.mark.parametrize("seed", [1, 2])
def test_dream_equals_its_diffusion_generate_pass_for_pass(tmp_path: Path, seed: int) -> None:
    reference, ours = backends(tmp_path, "dream", seed)
    prompt = reference.instruction_tokens(INSTRUCTION)
    for length, steps in ((8, 8), (8, 16), (24, 24), (32, 16)):
        expected = dream_generate(reference, prompt, length, steps)
        settings = DiffusionSettings.reference(schedule="timestep", steps=steps, stop_at_eos=False)
        for name, backend in ours.items():
            got = sharpen_canvases(backend, length, settings)
            assert [c.tolist() for c in got] == [c.tolist() for c in expected], (name, length, steps)
