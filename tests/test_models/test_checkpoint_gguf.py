"""SDAR and Fast-dLLM v2 checkpoints written as GGUFs that llama.cpp runs (models/checkpoint_gguf.py).

Tiny random checkpoints in the real layouts (tests/fixture_checkpoints.py) are converted, loaded by the
llama.cpp backend, and drafted with block by block: the same canvases, pass for pass, as the torch backend
computes from the checkpoint itself, and the same tokens for the same text.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from fixture_checkpoints import random_weights, write_checkpoint
from hub_server import FakeHub, HubFile

from app.cli import main
from app.storage.paths import sharpen_paths
from engines.diffusion.engine import DiffusionEngine
from engines.diffusion.hf.backend import TorchDiffusionBackend
from engines.diffusion.llama_backend import LlamaDiffusionBackend
from engines.diffusion.load_settings import DiffusionLoadSettings
from engines.diffusion.settings import DiffusionSettings
from engines.events import DiffusionStats, Done, Pass
from models.checkpoint_gguf import write_checkpoint_gguf
from models.decoding import file_decoding
from models.gguf_info import inspect_gguf

INSTRUCTION = "Write a short note to Sam about the 3 meetings on Friday."
TWIN = {"sdar": "qwen3", "fast_dllm_v2": "qwen2"}


def passes(backend: TorchDiffusionBackend | LlamaDiffusionBackend, settings: DiffusionSettings) -> list[list[int]]:
    events = list(DiffusionEngine(backend, "converted").draft(INSTRUCTION, 24, settings))
    done = events[-1]
    assert isinstance(done, Done) and isinstance(done.stats, DiffusionStats) and done.stats.cache == "block"
    return [list(e.canvas) for e in events if isinstance(e, Pass)]


@pytest.mark.parametrize("architecture", ["sdar", "fast_dllm_v2"])
def test_a_converted_checkpoint_drafts_on_llama_cpp_as_on_torch(tmp_path: Path, architecture: str) -> None:
    folder = write_checkpoint(tmp_path / architecture, architecture, weights=random_weights(architecture, seed=7))
    path = write_checkpoint_gguf(folder, tmp_path / f"{architecture}.gguf", "F32")
    torch_backend = TorchDiffusionBackend(folder, DiffusionLoadSettings(cache="block", n_ctx=512))
    spec = torch_backend.spec
    info = inspect_gguf(path)
    assert (info.architecture, info.causal_attention) == (TWIN[architecture], False)
    assert (info.block_causal_length, info.mask_token_id) == (spec.block_causal_length, spec.mask_token_id)
    assert info.shift_logits == spec.shift_logits and not path.with_suffix(".partial").exists()
    # Asked for the dual cache, a block-causal file gets the block cache: the attention it was trained with.
    llama = LlamaDiffusionBackend(path, DiffusionLoadSettings(n_ctx=512, cache="dual"))
    assert llama.cache_mode == "block" and "block-causally" in llama.cache_note
    assert llama.instruction_tokens(INSTRUCTION) == torch_backend.instruction_tokens(INSTRUCTION)
    for block, steps, sampler in ((spec.block_causal_length, 12, "sharpen"), (8, 6, "sharpen"), (8, 12, architecture)):
        # The authors' own loop too (SDAR's dynamic threshold, Fast-dLLM v2's sub-blocks and first token).
        threshold = 0.5 if sampler != "sharpen" else None
        settings = DiffusionSettings.reference(
            steps=steps, block_length=block, stop_at_eos=False, sampler=sampler, threshold=threshold, sub_block=4
        )
        assert passes(llama, settings) == passes(torch_backend, settings), (architecture, block, sampler)
    decoding = file_decoding(path)
    assert decoding == file_decoding(folder) and decoding["block_length"] == spec.block_causal_length
    assert decoding["sampler"] == architecture


def test_quantized_weights_stay_close(tmp_path: Path) -> None:
    folder = write_checkpoint(tmp_path / "sdar", "sdar", weights=random_weights("sdar", seed=8))
    exact = LlamaDiffusionBackend(write_checkpoint_gguf(folder, tmp_path / "f32.gguf", "F32"))
    q8 = write_checkpoint_gguf(folder, tmp_path / "q8.gguf", "Q8_0")
    assert q8.stat().st_size < exact.model_path.stat().st_size / 2
    quantized = LlamaDiffusionBackend(q8)
    sequence = np.array([*exact.instruction_tokens(INSTRUCTION), *[exact.mask_token_id] * 8])
    for backend in (exact, quantized):
        backend.reset(block_length=4)
    start = len(sequence) - 8
    window = start - start % 4 + 4  # the first aligned block's end
    a, b = (backend.logits(sequence, start, window, start) for backend in (exact, quantized))
    assert np.abs(a - b).max() < 0.05 * np.abs(a).max()


def test_sharpen_models_convert(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = write_checkpoint(tmp_path / "fast", "fast_dllm_v2", weights=random_weights("fast_dllm_v2", seed=9))
    target = tmp_path / "out" / "fast.gguf"
    assert main(["models", "convert", str(folder), "--out", str(target), "--quantization", "F16"]) == 0
    out = capsys.readouterr().out
    assert str(target) in out and f"sharpen config set models.draft {target}" in out
    assert inspect_gguf(target).file_type == "F16"
    assert main(["inspect", str(target), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["block_causal_length"] == 32


def test_converting_a_model_with_a_gguf_of_its_own_is_one_line(
    llada_checkpoint: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["models", "convert", str(llada_checkpoint), "--out", str(tmp_path / "x.gguf")]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("sharpen: error:") and "block-causal" in err[0]
    assert not (tmp_path / "x.gguf").exists()


def test_an_sdar_model_from_pull_to_a_draft_on_each_backend(
    hub: FakeHub, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """As a user goes: pull a block-causal checkpoint from the Hub (its remote code never runs), draft with it
    on torch, convert it by name, and draft with the GGUF on llama.cpp; each draft runs the model's own
    block length and its authors' loop, from the catalogue entry and then from the GGUF's metadata."""
    folder = write_checkpoint(tmp_path / "sdar", "sdar", weights=random_weights("sdar", seed=10))
    files = {p.name: HubFile(p.read_bytes(), lfs=p.suffix == ".safetensors") for p in folder.iterdir()}
    files["modeling_sdar.py"] = HubFile(b"raise SystemExit('remote code must never run')", lfs=False)
    hub.add("acme/tiny-sdar", files)
    config = sharpen_paths().config_file
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(
        '[catalogue.tiny-sdar]\nrole = "draft"\nengine = "torch-diffusion"\nbackend = "torch"\n'
        'source = "hf:acme/tiny-sdar"\nformat = "hf-safetensors"\nquantization = "none"\n'
        'decoding_threshold = 0.85\ndecoding_block_length = 4\ndecoding_sampler = "sdar"\n',
        encoding="utf-8",
    )
    assert main(["models", "pull", "tiny-sdar"]) == 0
    assert main(["models", "use", "tiny-sdar", "--for", "draft"]) == 0
    drafted = []
    for _ in range(2):
        capsys.readouterr()
        assert main(["draft", "Write a note to Sam.", "--tokens", "16", "--engine", "diffusion", "--json"]) == 0
        drafted.append(json.loads(capsys.readouterr().out))
        target = tmp_path / "sdar.gguf"
        if not target.exists():
            assert main(["models", "convert", "tiny-sdar", "--out", str(target)]) == 0
            assert main(["config", "set", "models.draft", str(target)]) == 0
    for payload in drafted:
        assert payload["cache"] == "block" and payload["settings"]["block_length"] == 4
        assert payload["settings"]["sampler"] == "sdar" and payload["settings"]["threshold"] == 0.85
    assert [payload["model"] for payload in drafted] == ["tiny-sdar", "sdar.gguf"]
