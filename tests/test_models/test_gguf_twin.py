"""A diffusion GGUF's cacheable twin: same tensors, the causal architecture that computes the same graph
with causal attention off, so llama.cpp keeps a KV cache and Sharpen's prefix and dual caches can run on it.

Per architecture (tiny random-weight GGUFs written here): the twin without a cache gives the native
file's logits, and a greedy draft with either cache agrees with the twin's full re-decoding.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from fixture_models import calm_tensors, moe_tensors, write_tiny_model

from app.cli import main
from app.service import SharpenService
from engines.diffusion.engine import DiffusionEngine
from engines.diffusion.llama_backend import LlamaDiffusionBackend
from engines.diffusion.load_settings import DiffusionLoadSettings
from engines.diffusion.settings import DiffusionSettings
from engines.events import Pass
from models.gguf_header import read_gguf_header
from models.gguf_info import inspect_gguf
from models.gguf_twin import TwinError, current_twin, write_twin

MASK_ID = 16  # "<empty_output>" in SmolLM2's vocabulary, as the other tiny diffusion files use
PROMPTS = ("Write a note to Sam about Friday.", "List three things to pack for a trip.", "Describe the sea at night.")
GREEDY = DiffusionSettings.reference(steps=64, block_length=32, stop_at_eos=False)


def native_file(folder: Path, architecture: str) -> Path:
    if architecture == "rnd1":
        return write_tiny_model(
            folder / "rnd1.gguf",
            arch="rnd1",
            mask_token_id=MASK_ID,
            tensors=moe_tensors(residual_scale=0.25),
            experts=(4, 2),
        )
    shift = architecture == "dream"
    path = folder / f"{architecture}.gguf"
    return write_tiny_model(path, arch=architecture, mask_token_id=MASK_ID, shift_logits=shift, tensors=calm_tensors())


def canvas(backend: LlamaDiffusionBackend, prompt: str) -> np.ndarray:
    passes = [e for e in DiffusionEngine(backend, "twin").draft(prompt, 128, GREEDY) if isinstance(e, Pass)]
    return np.array(passes[-1].canvas)


@pytest.mark.parametrize(("architecture", "twin"), [("llada", "llama"), ("dream", "qwen2"), ("rnd1", "qwen3moe")])
def test_the_twin_computes_the_native_graph_with_a_cache(tmp_path: Path, architecture: str, twin: str) -> None:
    source = native_file(tmp_path, architecture)
    before = source.read_bytes()
    path = write_twin(source, tmp_path / "twins")
    assert source.read_bytes() == before, "the source is never touched"
    info, native_info = inspect_gguf(path), inspect_gguf(source)
    assert info.architecture == twin and info.causal_attention is False and info.is_cacheable_diffusion
    assert (info.mask_token_id, info.shift_logits) == (native_info.mask_token_id, native_info.shift_logits)
    source_header, twin_header = read_gguf_header(source), read_gguf_header(path)
    assert twin_header.tensors == source_header.tensors
    data = path.read_bytes()[twin_header.data_start :]
    assert data == before[source_header.data_start :], "tensor data copied unchanged"

    native = LlamaDiffusionBackend(source, DiffusionLoadSettings(n_ctx=512))
    uncached = LlamaDiffusionBackend(path, DiffusionLoadSettings(n_ctx=512, cache="none"))
    assert native.cache_mode == "none"
    sequence = np.array([*native.instruction_tokens(PROMPTS[0]), *[MASK_ID] * 48])
    start = len(sequence) - 48
    np.testing.assert_allclose(
        uncached.logits(sequence, start, len(sequence), 0), native.logits(sequence, start, len(sequence), 0), atol=1e-3
    )
    full = [canvas(uncached, prompt) for prompt in PROMPTS]
    native_full = [canvas(native, prompt) for prompt in PROMPTS]
    for mode in ("prefix", "dual"):
        cached = LlamaDiffusionBackend(path, DiffusionLoadSettings(n_ctx=512, cache=mode))
        assert cached.cache_mode == mode
        drafts = [canvas(cached, prompt) for prompt in PROMPTS]
        # The cache's own effect: the same file fully re-decoded against cached. (Against the native file
        # the figure also counts llama.cpp's F16 key/value cache, which moves these near-flat logits ~1e-4.)
        agreement = [float(np.mean(a == b)) for a, b in zip(drafts, full, strict=True)]
        native_agreement = [float(np.mean(a == b)) for a, b in zip(drafts, native_full, strict=True)]
        print(
            f"{architecture}, {mode} cache: against full re-decoding {np.mean(agreement):.1%}, "
            f"against the native file {np.mean(native_agreement):.1%}"
        )
        assert np.mean(agreement) >= 0.9, (mode, agreement)
        assert cached.cached_passes > cached.full_passes > 0


def test_a_changed_source_is_converted_again_and_a_touched_one_is_not(tmp_path: Path) -> None:
    source = native_file(tmp_path, "llada")
    twins = tmp_path / "twins"
    first = write_twin(source, twins)
    stamp = first.stat().st_mtime_ns
    os.utime(source, ns=(source.stat().st_atime_ns, source.stat().st_mtime_ns + 10**9))
    assert current_twin(source, twins) == first, "same bytes: the twin stays"
    assert write_twin(source, twins).stat().st_mtime_ns == stamp
    write_tiny_model(source, arch="llada", mask_token_id=MASK_ID, shift_logits=False, seed=3)
    assert current_twin(source, twins) is None, "other bytes: written again"
    assert inspect_gguf(write_twin(source, twins)).architecture == "llama"


def test_an_architecture_without_a_twin_is_refused_with_the_reason(tmp_path: Path) -> None:
    header_only = write_tiny_model(tmp_path / "moe.gguf", arch="llada-moe", mask_token_id=MASK_ID, with_tensors=False)
    with pytest.raises(TwinError, match="per head"):
        write_twin(header_only, tmp_path / "twins")


def test_a_native_draft_model_is_served_from_its_twin_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = native_file(tmp_path, "llada")
    assert main(["config", "path"]) == 0
    config_file = Path(capsys.readouterr().out.strip())
    config_file.parent.mkdir(parents=True, exist_ok=True)
    entry = f'[catalogue.tiny-llada]\nrole = "draft"\nengine = "llama-diffusion"\nsource = "path:{source}"\n'
    config_file.write_text(entry)
    assert main(["models", "info", "tiny-llada", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["cache"].startswith("dual; served as its causal twin (llama)"), info["cache"]
    assert main(["models", "use", "tiny-llada", "--for", "draft"]) == 0
    engine = SharpenService.from_environment().engines.diffusion()
    backend = engine.backend
    assert isinstance(backend, LlamaDiffusionBackend) and backend.cache_mode == "dual"
    assert backend.model_path.name.endswith(".twin.gguf") and backend.gguf.architecture == "llama"
    assert backend.model_path.parent.name == "twins" and source.is_file()
    capsys.readouterr()
    assert main(["doctor", "--json"]) in (0, 1)
    findings = {f["check"]: f for f in json.loads(capsys.readouterr().out)["findings"]}
    assert findings["models.draft"]["facts"]["cache"] == "dual"


def test_without_room_for_the_copy_it_runs_natively_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil

    from app.storage.paths import sharpen_paths

    source = native_file(tmp_path, "llada")
    service = SharpenService.from_environment()
    usage = shutil.disk_usage(tmp_path)
    monkeypatch.setattr(shutil, "disk_usage", lambda _path: usage._replace(free=1000))
    served = service.models.served_file(source)
    assert served.path == source and not served.cached and "GB free" in served.note
    assert not list((sharpen_paths().data_dir / "twins").glob("*.twin.gguf"))
    assert not list((sharpen_paths().data_dir / "twins").glob("*.partial"))


def test_two_names_of_one_stem_keep_two_twins(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = write_twin(native_file(tmp_path / "a", "llada"), tmp_path / "twins")
    second = write_twin(native_file(tmp_path / "b", "dream"), tmp_path / "twins")
    assert first != second and first.is_file() and second.is_file()
