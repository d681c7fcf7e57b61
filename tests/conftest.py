"""Shared fixtures: an isolated SHARPEN_HOME, the real embedded model, tiny real GGUF files."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fixture_models import write_tiny_model
from hub_server import FakeHub, RunningHub

from app.orchestration.model_manager import ModelManager
from app.service import SharpenService
from app.storage.config import load_config
from app.storage.paths import SharpenPaths
from engines.llama_ar import LlamaAREngine, LlamaSettings
from models.catalogue import resolve_model

# SmolLM2's "<empty_output>" special token, unused in text, serves the tiny diffusion models as their mask.
MASK_ID = 16


@pytest.fixture(scope="session")
def merged_embedded_adapters(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The embedded adapters (sharpen-write, sharpen-draft) merged into their base once for the session, as
    a fresh install merges them on first use."""
    paths = SharpenPaths.under(tmp_path_factory.mktemp("merges"))
    service = SharpenService(load_config(paths.config_file), paths)
    for name in ("sharpen-write", "sharpen-draft"):
        path = resolve_model(name).path
        served = service.models.served_ar(path) if name == "sharpen-write" else service.models.served_file(path)
        assert served.path.parent == service.models.adapters_dir, served.note
    return service.models.adapters_dir


@pytest.fixture(autouse=True)
def sharpen_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, merged_embedded_adapters: Path) -> Path:
    """Every test gets its own config, data, state and cache dirs; merged adapters alone are shared by the
    session (a merge is named by its adapter's path and rewritten when the adapter changes, so sharing one
    folder changes nothing but the seconds each test would spend merging the embedded adapters again)."""
    home = tmp_path / "sharpen-home"
    monkeypatch.setattr(ModelManager, "adapters_dir", property(lambda _self: merged_embedded_adapters))
    monkeypatch.setenv("SHARPEN_HOME", str(home))
    # Sharpen lists the models found in Ollama's store, LM Studio's folders and the HF cache (HOME, OLLAMA_MODELS,
    # HF_HOME): empty ones, so no test reads the real ones and every listing is the same on every machine.
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("OLLAMA_MODELS", str(tmp_path / "ollama-models"))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    for key in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        monkeypatch.delenv(key, raising=False)
    for key in ("SHARPEN_API_KEY", "SHARPEN_REMOTE_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(key, raising=False)
    return home


@pytest.fixture(scope="session")
def embedded_model_path() -> Path:
    return resolve_model("smollm2-135m-instruct").path


@pytest.fixture(scope="session")
def ar_engine(embedded_model_path: Path) -> LlamaAREngine:
    """The real embedded AR model, loaded once for the session."""
    return LlamaAREngine(embedded_model_path, "smollm2-135m-instruct", LlamaSettings(n_ctx=1024))


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("models")


@pytest.fixture(scope="session")
def tiny_llama_path(model_dir: Path) -> Path:
    return write_tiny_model(model_dir / "tiny-llama.gguf")


@pytest.fixture(scope="session")
def tiny_fim_path(model_dir: Path) -> Path:
    # SmolLM2 has no FIM tokens; this file declares three of its special tokens as prefix, suffix, middle.
    return write_tiny_model(model_dir / "tiny-fim.gguf", fim=(4, 5, 6))


@pytest.fixture(scope="session")
def tiny_llada_path(model_dir: Path) -> Path:
    """LLaDA architecture: llama.cpp runs it as diffusion, no KV cache, predictions in place."""
    return write_tiny_model(model_dir / "tiny-llada.gguf", arch="llada", mask_token_id=MASK_ID, shift_logits=False)


@pytest.fixture(scope="session")
def tiny_dream_path(model_dir: Path) -> Path:
    """Dream architecture: llama.cpp diffusion, logits shifted by one (the key is absent: shift)."""
    return write_tiny_model(model_dir / "tiny-dream.gguf", arch="dream", mask_token_id=MASK_ID)


@pytest.fixture(scope="session")
def tiny_cacheable_path(model_dir: Path) -> Path:
    """Sharpen's cacheable form of the LLaDA weights above: llama architecture, causal = false, a mask token."""
    return write_tiny_model(model_dir / "tiny-cacheable.gguf", causal=False, mask_token_id=MASK_ID, shift_logits=False)


@pytest.fixture(scope="session")
def confident_llada_path(model_dir: Path) -> Path:
    """Predicts " the" (token 260) everywhere with probability near 1."""
    return write_tiny_model(
        model_dir / "confident-llada.gguf", arch="llada", mask_token_id=MASK_ID, shift_logits=False, confident_token=260
    )


@pytest.fixture(scope="session")
def unknown_arch_path(model_dir: Path) -> Path:
    return write_tiny_model(model_dir / "unknown-arch.gguf", arch="notarealarch")


@pytest.fixture(scope="session")
def truncated_path(model_dir: Path, tiny_llama_path: Path) -> Path:
    data = tiny_llama_path.read_bytes()
    path = model_dir / "truncated.gguf"
    path.write_bytes(data[: len(data) // 2])
    return path


@pytest.fixture(scope="session")
def llada_checkpoint(model_dir: Path) -> Path:
    """A tiny LLaDA checkpoint folder in the real Hugging Face layout (split in two shards)."""
    from fixture_checkpoints import write_checkpoint

    return write_checkpoint(model_dir / "tiny-llada-hf", "llada", shards=2)


@pytest.fixture(scope="session")
def dream_checkpoint(model_dir: Path) -> Path:
    from fixture_checkpoints import write_checkpoint

    return write_checkpoint(model_dir / "tiny-dream-hf", "dream")


@pytest.fixture
def hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeHub]:
    """A loopback server in the Hugging Face Hub's layout; HF_ENDPOINT points at it, HF_HOME is private."""
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    with RunningHub() as running:
        monkeypatch.setenv("HF_ENDPOINT", running.url)
        yield running
