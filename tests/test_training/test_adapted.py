"""Sharpen's adapted drafters: an AR GGUF made a diffusion model by a LoRA adapter at load time.

Real parts: the tiny random llama GGUF stands in for SmolLM2 as the base (same tokenizer and template),
llama.cpp applies the adapter GGUF that models/adapted.py writes, and torch computes what it should.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="training the adapter needs the torch extra")

from lora_support import random_lora, tiny_plan  # noqa: E402

from app.cli import main  # noqa: E402
from app.service import SharpenService  # noqa: E402
from app.storage.config import load_config  # noqa: E402
from app.storage.paths import sharpen_paths  # noqa: E402
from engines.diffusion.engine import DiffusionEngine  # noqa: E402
from engines.diffusion.llama_backend import LlamaDiffusionBackend  # noqa: E402
from engines.diffusion.load_settings import DiffusionLoadSettings  # noqa: E402
from engines.diffusion.settings import DiffusionSettings  # noqa: E402
from engines.events import DiffusionStats, Done  # noqa: E402
from models import adapted  # noqa: E402
from models.adapted import (  # noqa: E402
    MASK_TOKEN_ID,
    AdapterBaseMismatch,
    adapted_model,
    adapter_info,
    is_adapter,
    verify_base,
    write_adapter,
)
from models.errors import ModelFileError  # noqa: E402
from models.hub import sha256_of  # noqa: E402
from training.adapt.examples import encode_pairs  # noqa: E402
from training.adapt.lora import LoRALinear, base_model  # noqa: E402
from training.adapt.run import run  # noqa: E402
from training.data import Pair  # noqa: E402


def test_llama_cpp_with_the_adapter_computes_what_torch_computes(tiny_llama_path: Path, tmp_path: Path) -> None:
    """The adapter file is faithful: base + LoRA, bidirectional, logits shifted, in llama.cpp and in torch."""
    model = base_model(tiny_llama_path).eval()
    lora = random_lora(model, rank=4)
    path = write_adapter(tmp_path / "lora.gguf", tiny_llama_path, lora, alpha=4.0, name="parity")
    backend = LlamaDiffusionBackend(tiny_llama_path, DiffusionLoadSettings(n_ctx=128, cache="none"), adapter=path)
    assert backend.shift == 1 and backend.mask_token_id == MASK_TOKEN_ID and backend.cache_mode == "none"
    prompt = backend.instruction_tokens("Write a short note about the picnic.")
    sequence = np.array([*prompt, *[MASK_TOKEN_ID] * 12])
    start, end = len(prompt), len(sequence)
    ours = backend.logits(sequence, start, end, start)
    with torch.no_grad():
        hidden, _ = model(torch.tensor(sequence)[None], torch.arange(len(sequence)))
        theirs = model.logits(hidden[0, start - 1 : end - 1]).numpy()
    assert ours.shape == theirs.shape == (12, 49152)
    assert np.allclose(ours, theirs, atol=3e-3, rtol=1e-3)
    # The base alone computes something else: the LoRA really is applied.
    with torch.no_grad():
        for layer in (m for m in model.modules() if isinstance(m, LoRALinear)):
            layer.b.zero_()
        hidden, _ = model(torch.tensor(sequence)[None], torch.arange(len(sequence)))
        bare = model.logits(hidden[0, start - 1 : end - 1]).numpy()
    assert not np.allclose(ours, bare, atol=1e-2)


def test_bidirectional_attention_sees_tokens_after(tiny_llama_path: Path, tmp_path: Path) -> None:
    """A later token changes an earlier row's logits: the causal AR base was made bidirectional at load."""
    model = base_model(tiny_llama_path)
    path = write_adapter(tmp_path / "lora.gguf", tiny_llama_path, random_lora(model, 2), alpha=2.0, name="t")
    backend = LlamaDiffusionBackend(tiny_llama_path, DiffusionLoadSettings(n_ctx=64, cache="none"), adapter=path)
    first = backend.logits(np.array([1, 300, MASK_TOKEN_ID, 400]), 1, 2, 1)
    second = backend.logits(np.array([1, 300, MASK_TOKEN_ID, 500]), 1, 2, 1)
    assert not np.allclose(first, second)


def test_the_adapter_names_its_base_and_how_to_run_it(tiny_llama_path: Path, tmp_path: Path) -> None:
    model = base_model(tiny_llama_path)
    path = write_adapter(tmp_path / "lora.gguf", tiny_llama_path, random_lora(model, 3), alpha=3.0, name="t")
    info = adapter_info(path)
    assert is_adapter(path) and not is_adapter(tiny_llama_path)
    assert info.base_sha256 == sha256_of(tiny_llama_path) and info.base_size == tiny_llama_path.stat().st_size
    assert (info.rank, info.alpha, info.mask_token_id, info.shift_logits) == (3, 3.0, MASK_TOKEN_ID, True)
    assert info.base_file == tiny_llama_path.name and info.architecture == "llama"
    model_info = adapted_model(info, {"tiny": tiny_llama_path}, tmp_path / "records").info
    assert model_info.is_cacheable_diffusion and model_info.shift_logits
    assert model_info.n_parameters > adapted.inspect_gguf(tiny_llama_path).n_parameters
    with pytest.raises(ModelFileError, match="not one of Sharpen's LoRA adapters"):
        adapter_info(tiny_llama_path)


def test_a_different_base_is_refused_and_a_verified_one_is_hashed_once(
    tiny_llama_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = base_model(tiny_llama_path)
    path = write_adapter(tmp_path / "lora.gguf", tiny_llama_path, random_lora(model, 2), alpha=2.0, name="t")
    info = adapter_info(path)
    changed = shutil.copy(tiny_llama_path, tmp_path / "changed.gguf")
    with open(changed, "r+b") as handle:  # same size, one byte of the last tensor different
        handle.seek(-3, 2)
        byte = handle.read(1)
        handle.seek(-3, 2)
        handle.write(bytes([byte[0] ^ 0xFF]))
    with pytest.raises(AdapterBaseMismatch, match=r"has sha256 .* not the base the adapter lora\.gguf"):
        verify_base(Path(changed), info)
    with pytest.raises(AdapterBaseMismatch, match="bytes, not"):
        verify_base(tmp_path / "lora.gguf", info)
    calls: list[Path] = []

    def counted(path: Path) -> str:
        calls.append(path)
        return sha256_of(path)

    monkeypatch.setattr(adapted, "sha256_of", counted)
    verify_base(tiny_llama_path, info, tmp_path / "records")
    verify_base(tiny_llama_path, info, tmp_path / "records")
    assert calls == [tiny_llama_path]
    record = json.loads(next((tmp_path / "records").glob("verified-*.json")).read_text())
    assert record["size"] == tiny_llama_path.stat().st_size


def test_a_missing_base_says_what_to_install(tiny_llama_path: Path, tmp_path: Path) -> None:
    model = base_model(tiny_llama_path)
    path = write_adapter(tmp_path / "lora.gguf", tiny_llama_path, random_lora(model, 2), alpha=2.0, name="t")
    with pytest.raises(ModelFileError, match=r"is a LoRA adapter for tiny-llama.gguf .* not installed"):
        adapted_model(adapter_info(path), {}, None)


def test_adaptation_trains_and_the_adapter_drafts_with_the_dual_cache(tiny_llama_path: Path, tmp_path: Path) -> None:
    """A few steps of the real training loop on the tiny base; the adapter it writes drafts in llama.cpp."""
    plan = tiny_plan(
        tiny_llama_path,
        tmp_path,
        block_lengths=(),  # bidirectional
        max_steps=4,
        rank=4,
        alpha=4.0,
        eval_every=2,
        peak_lr=1e-2,
        warmup=1,
    )
    lines: list[str] = []
    path = run(plan, log=lines.append)
    rows = (plan.out / "training_log.csv").read_text().splitlines()
    assert (
        rows[0].startswith("step,tokens_seen,train_loss,heldout_loss,accuracy") and len(rows) == 1 + 3
    )  # the header; before training, steps 2 and 4
    assert "trainable parameters" in lines[0] and lines[-1].startswith("done: 4 steps")
    info = adapter_info(path)
    assert info.rank == 4 and info.base_sha256 == sha256_of(tiny_llama_path)
    backend = LlamaDiffusionBackend(tiny_llama_path, DiffusionLoadSettings(n_ctx=256), adapter=path)
    assert backend.cache_mode == "dual"
    # A tiny model taught a few steps is surest of end-of-text; ranked last, every pass runs.
    settings = replace(DiffusionSettings.reference(steps=8, block_length=8, eos="last"), stop_at_eos=False)
    done = [e for e in DiffusionEngine(backend, "tiny").draft("Write a poem.", 16, settings) if isinstance(e, Done)]
    assert isinstance(done[-1].stats, DiffusionStats) and done[-1].stats.cache == "dual"
    assert done[-1].stats.passes == 8 and backend.cached_passes > 0


def service_with_adapter(base: Path, adapter: Path, *, base_sha256: str) -> SharpenService:
    """A config whose catalogue knows the base (by sha256) and whose draft model is the adapter."""
    paths = sharpen_paths()
    paths.config_file.parent.mkdir(parents=True, exist_ok=True)
    paths.config_file.write_text(
        f'[models]\ndraft = "{adapter}"\n\n'
        f'[catalogue.tiny-base]\nrole = "complete"\nengine = "llama-ar"\nsource = "path:{base}"\n'
        f'sha256 = "{base_sha256}"\n',
        encoding="utf-8",
    )
    return SharpenService(load_config(paths.config_file), paths)


def test_the_service_drafts_with_an_adapter_merged_into_its_catalogued_base(
    tiny_llama_path: Path, tmp_path: Path
) -> None:
    model = base_model(tiny_llama_path)
    adapter = write_adapter(tmp_path / "lora.gguf", tiny_llama_path, random_lora(model, 2), alpha=2.0, name="t")
    service = service_with_adapter(tiny_llama_path, adapter, base_sha256=sha256_of(tiny_llama_path))
    planned = service.models.served_file(adapter, write=False)
    assert (planned.path, planned.adapter, planned.cached) == (tiny_llama_path, adapter, True)
    assert "its merged copy is written on first use" in planned.note
    assert service.models.check("draft", str(adapter)).path == adapter
    engine = service.engines.diffusion()
    backend = engine.backend
    assert isinstance(backend, LlamaDiffusionBackend) and backend.adapter is None
    assert backend.model_path.parent == service.models.adapters_dir
    assert backend.gguf.is_cacheable_diffusion and backend.shift == 1 and backend.cache_mode == "dual"
    assert service.models.served_file(adapter, write=False).path == backend.model_path, "written once"
    events = list(engine.draft("Write a poem.", 16, DiffusionSettings.reference(steps=8, block_length=8)))
    done = [e for e in events if isinstance(e, Done)][-1]
    assert isinstance(done.stats, DiffusionStats) and done.stats.cache == "dual"
    # The merged file computes what the adapter applied at run time does, up to Q8_0's rounding.
    applied = LlamaDiffusionBackend(tiny_llama_path, DiffusionLoadSettings(n_ctx=64, cache="none"), adapter=adapter)
    sequence = np.array([*applied.instruction_tokens("Write a poem."), *[MASK_TOKEN_ID] * 8])
    start = len(sequence) - 8
    ours = backend.logits(sequence, start, len(sequence), start)
    theirs = applied.logits(sequence, start, len(sequence), start)
    assert np.corrcoef(ours.ravel(), theirs.ravel())[0, 1] > 0.99


def test_without_room_to_merge_the_adapter_is_applied_at_load(
    tiny_llama_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = base_model(tiny_llama_path)
    adapter = write_adapter(tmp_path / "lora.gguf", tiny_llama_path, random_lora(model, 2), alpha=2.0, name="t")
    service = service_with_adapter(tiny_llama_path, adapter, base_sha256=sha256_of(tiny_llama_path))
    monkeypatch.setattr(adapted.shutil, "disk_usage", lambda _path: shutil._ntuple_diskusage(10**9, 10**9, 1000))
    served = service.models.served_file(adapter)
    assert (served.path, served.adapter) == (tiny_llama_path, adapter)
    assert "its merged copy could not be written" in served.note and "MB free for the merged drafter" in served.note
    backend = service.engines.diffusion().backend
    assert isinstance(backend, LlamaDiffusionBackend) and backend.adapter == adapter


def test_an_adapter_whose_base_is_not_catalogued_is_refused_in_one_line(
    tiny_llama_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = base_model(tiny_llama_path)
    adapter = write_adapter(tmp_path / "lora.gguf", tiny_llama_path, random_lora(model, 2), alpha=2.0, name="t")
    service_with_adapter(tiny_llama_path, adapter, base_sha256="0" * 64)
    assert main(["doctor"]) in (0, 1)
    out = capsys.readouterr().out
    assert "is a LoRA adapter for tiny-llama.gguf" in out and "Traceback" not in out


def test_training_prompts_are_the_prompts_the_backend_renders(tiny_llama_path: Path, tmp_path: Path) -> None:
    """The adapter learns from prompts exactly as the llama.cpp backend renders and tokenizes them."""
    pairs = [Pair(0, "Write a haiku about tea, please.", "Green steam rises."), Pair(1, "Say hi to Zoë.", "Hi Zoë!")]
    examples, eos = encode_pairs(tiny_llama_path, pairs, max_answer=64)
    model = base_model(tiny_llama_path)
    path = write_adapter(tmp_path / "lora.gguf", tiny_llama_path, random_lora(model, 2), alpha=2.0, name="t")
    backend = LlamaDiffusionBackend(tiny_llama_path, DiffusionLoadSettings(n_ctx=64), adapter=path)
    for pair, example in zip(pairs, examples, strict=True):
        assert example.prompt == backend.instruction_tokens(pair.instruction)
        assert example.answer == [*backend.tokenize(pair.draft, add_bos=False), eos]
    assert eos in backend.eos_token_ids
