"""The session's engines, loaded from the config's sections with the real tiny GGUFs: kept, swapped, refused."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import MASK_ID
from fixture_models import write_tiny_model

from app.orchestration.engine_registry import EngineRegistry, NoDraftModel
from app.storage.config import ArSection, Config, DiffusionSection, ModelsSection, load_config
from app.storage.paths import sharpen_paths
from engines.diffusion.llama_backend import LlamaDiffusionBackend
from engines.diffusion.load_settings import DiffusionLoadSettings
from engines.llama_ar import LlamaAREngine, LlamaSettings
from models.catalogue import CatalogueEntry, ResolvedModel
from models.errors import UnsupportedModel


def registry(complete: Path | str, draft: Path | str, **sections: object) -> EngineRegistry:
    models = ModelsSection(complete=str(complete), draft=str(draft))
    return EngineRegistry(sharpen_paths(), Config(models=models, **sections))  # type: ignore[arg-type]


def llama_backend(engines: EngineRegistry) -> LlamaDiffusionBackend:
    backend = engines.diffusion().backend
    assert isinstance(backend, LlamaDiffusionBackend)
    return backend


def test_the_sections_are_the_engines_settings() -> None:
    assert isinstance(ArSection(), LlamaSettings) and isinstance(DiffusionSection(), DiffusionLoadSettings)
    # One default for each: the dual cache for both backends, n_threads for both.
    assert DiffusionLoadSettings().cache == DiffusionSection().cache == "dual"
    assert DiffusionLoadSettings().n_threads == ArSection().n_threads == 0
    assert LlamaSettings().n_ctx == ArSection().n_ctx == 2048


def test_engines_load_on_first_use_and_are_kept(tiny_llama_path: Path, tiny_cacheable_path: Path) -> None:
    engines = registry(tiny_llama_path, tiny_cacheable_path)
    ar = engines.ar()
    assert isinstance(ar, LlamaAREngine) and ar.model_path == tiny_llama_path
    assert engines.ar() is ar
    diffusion = engines.diffusion()
    assert diffusion is engines.diffusion()
    assert llama_backend(engines).model_path == tiny_cacheable_path
    assert diffusion.model_name == engines.models.resolve(str(tiny_cacheable_path)).name


def test_each_setting_reaches_its_engine(tiny_llama_path: Path, tiny_cacheable_path: Path) -> None:
    ar_section = ArSection(n_ctx=384, n_threads=1, n_batch=64, n_gpu_layers=0)
    diffusion_section = DiffusionSection(n_ctx=320, n_threads=2, cache="prefix", kv_type="f16")
    engines = registry(tiny_llama_path, tiny_cacheable_path, ar=ar_section, diffusion=diffusion_section)
    ar = engines.ar()
    assert isinstance(ar, LlamaAREngine)
    assert ar.context_length == 384  # below the file's 512
    assert (ar.settings.n_threads, ar.settings.n_batch, ar.settings.n_gpu_layers) == (1, 64, 0)
    backend = llama_backend(engines)
    assert backend.context_length == 320
    assert backend.cache_mode == "prefix" and backend.kv_type == "f16"
    # ar.n_gpu_layers serves both engines; "auto" quantization is settled for the model (none: a GGUF).
    assert type(backend.settings) is DiffusionLoadSettings
    assert (backend.settings.n_threads, backend.settings.n_gpu_layers) == (2, 0)
    assert backend.settings.quantization == "none"


def test_use_model_writes_the_config_and_reloads_that_engine_only(
    tiny_llama_path: Path, tiny_cacheable_path: Path, model_dir: Path
) -> None:
    engines = registry(tiny_llama_path, tiny_cacheable_path)
    ar, diffusion = engines.ar(), engines.diffusion()
    other = write_tiny_model(
        model_dir / "other-cacheable.gguf", causal=False, mask_token_id=MASK_ID, shift_logits=False, seed=1
    )
    engines.use_model("draft", str(other))
    assert load_config(engines.paths.config_file).models.draft == str(other)
    assert engines.config.models.draft == str(other)
    assert engines.config.models.complete == str(tiny_llama_path)
    assert engines.diffusion() is not diffusion and llama_backend(engines).model_path == other
    assert engines.ar() is ar

    other_ar = write_tiny_model(model_dir / "other-llama.gguf", seed=2)
    engines.use_model("complete", str(other_ar))
    assert load_config(engines.paths.config_file).models.complete == str(other_ar)
    swapped = engines.ar()
    assert swapped is not ar and isinstance(swapped, LlamaAREngine) and swapped.model_path == other_ar


def test_a_model_that_cannot_serve_the_role_changes_nothing(
    tiny_llama_path: Path, tiny_cacheable_path: Path, tiny_llada_path: Path
) -> None:
    engines = registry(tiny_llama_path, tiny_cacheable_path)
    ar = engines.ar()
    with pytest.raises(UnsupportedModel, match="diffusion model"):
        engines.use_model("complete", str(tiny_llada_path))
    assert not engines.paths.config_file.exists()
    assert engines.config.models.complete == str(tiny_llama_path) and engines.ar() is ar


def test_a_diffusion_architecture_is_served_from_its_cacheable_twin(
    tiny_llama_path: Path, tiny_llada_path: Path
) -> None:
    engines = registry(tiny_llama_path, tiny_llada_path)
    backend = llama_backend(engines)
    assert backend.model_path.parent == engines.models.twins_dir
    assert backend.model_path == engines.models.served_file(tiny_llada_path).path


@pytest.mark.parametrize("draft", ["", "   "])
def test_no_draft_model_configured(tiny_llama_path: Path, draft: str) -> None:
    engines = registry(tiny_llama_path, draft)
    with pytest.raises(NoDraftModel, match="no diffusion model is configured"):
        engines.diffusion()
    assert isinstance(engines.ar(), LlamaAREngine)  # the AR engine does not need one


def test_a_remote_completion_model_only_names_its_server() -> None:
    from engines.remote_ar import RemoteAREngine

    engines = registry("openai:http://127.0.0.1:9/v1#nothing", "", ar=ArSection(n_ctx=4096))
    engine = engines.ar()
    assert isinstance(engine, RemoteAREngine) and engine.context_length == 4096
    assert engine.source.model == "nothing" and engines.ar() is engine


def test_quantization_auto_takes_the_checkpoints_catalogue_entry(tmp_path: Path) -> None:
    entry = CatalogueEntry("q", "draft", "torch-diffusion", "path:/q", format="hf-safetensors", quantization="nf4")
    quantized = ResolvedModel("q", Path("/q"), entry)
    gguf = ResolvedModel("g", Path("/g.gguf"), replace(entry, format="gguf", quantization="Q8_0"))
    engines = registry("c", "d")
    assert engines.quantization_for(quantized) == "nf4"
    assert engines.quantization_for(gguf) == "none"
    assert engines.quantization_for(ResolvedModel("x", Path("/x"), None)) == "none"
    converted = tmp_path / "q.Q8_0.gguf"  # the checkpoint entry's GGUF (models pull NAME --gguf)
    converted.write_bytes(b"GGUF")
    assert engines.quantization_for(ResolvedModel("q", converted, entry)) == "none"
    engines.config = replace(engines.config, diffusion=DiffusionSection(quantization="int8"))
    assert engines.quantization_for(quantized) == engines.quantization_for(gguf) == "int8"


def test_a_checkpoint_folder_loads_on_torch_with_the_same_settings(
    tiny_llama_path: Path, llada_checkpoint: Path
) -> None:
    pytest.importorskip("torch")
    from engines.diffusion.hf.backend import TorchDiffusionBackend

    section = DiffusionSection(n_ctx=256, n_threads=1, cache="prefix")
    engines = registry(tiny_llama_path, llada_checkpoint, diffusion=section)
    backend = engines.diffusion().backend
    assert isinstance(backend, TorchDiffusionBackend)
    assert backend.context_length == 256 and backend.cache_mode == "prefix"
    assert backend.settings.n_threads == 1 and backend.settings.quantization == "none"
    assert backend.loaded.quantization == "none"


def test_a_checkpoint_without_torch_is_refused_with_the_fix(
    tiny_llama_path: Path, llada_checkpoint: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "engines.diffusion.hf.backend", None)  # import fails as without torch
    engines = registry(tiny_llama_path, llada_checkpoint)
    with pytest.raises(UnsupportedModel, match="needs torch") as error:
        engines.diffusion()
    assert "pip install -e '.[torch]'" in str(error.value)
