"""Models a writer already has: Ollama's store, LM Studio's folders and the HF cache, laid out on disk as those
tools lay them out around real GGUFs (the embedded model, a tiny diffusion model, a vision projector), listed,
used by their names, drafting and completing on real llama.cpp, and reported by doctor."""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
from tool_stores import (
    add_hf_cache_model,
    add_lmstudio_model,
    add_ollama_model,
    write_embedding_model,
    write_vision_projector,
)

from app.cli.main import main
from app.doctor.stores import check_stores
from app.service import SharpenService
from models.found.architectures import known_architectures, knows_architecture
from models.found.files import split_part
from models.found.stores import AmbiguousModelName

AR_NAME = "smollm2:135m"
DRAFT_NAME = "acme/tinydraft:q8"
PROJECTOR = "acme/vision-GGUF/mmproj-f16.gguf"
VISION_MODEL = "acme/vision-GGUF/smol-Q4_1.gguf"
HF_MODEL = "owner/smol-GGUF/smol.gguf"


@dataclass(frozen=True)
class Stores:
    ollama: Path
    lmstudio: Path
    hf_cache: Path
    draft_blob: Path


@pytest.fixture
def stores(tmp_path: Path, embedded_model_path: Path, tiny_cacheable_path: Path) -> Stores:
    """Ollama's store (OLLAMA_MODELS, as conftest sets it), LM Studio's folder in the test's home, an HF cache."""
    ollama = Path(os.environ["OLLAMA_MODELS"])
    add_ollama_model(ollama, "smollm2", "135m", embedded_model_path)
    draft_blob = add_ollama_model(ollama, "tinydraft", "q8", tiny_cacheable_path, namespace="acme")
    not_gguf = tmp_path / "safetensors-layer"
    not_gguf.write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{}      ")
    add_ollama_model(ollama, "newengine", "latest", not_gguf)
    lmstudio = Path.home() / ".lmstudio" / "models"
    projector = write_vision_projector(tmp_path / "projector" / "mmproj-f16.gguf")
    add_lmstudio_model(lmstudio, "acme", "vision-GGUF", projector, "mmproj-f16.gguf")
    add_lmstudio_model(lmstudio, "acme", "vision-GGUF", embedded_model_path, "smol-Q4_1.gguf")
    hf_cache = Path(os.environ["HF_HOME"]) / "hub"
    add_hf_cache_model(hf_cache, "owner/smol-GGUF", embedded_model_path, "smol.gguf")
    return Stores(ollama, lmstudio, hf_cache, draft_blob)


def listed(capsys: pytest.CaptureFixture[str]) -> dict[str, dict[str, object]]:
    assert main(["models", "list", "--json"]) == 0
    return {model["name"]: model for model in json.loads(capsys.readouterr().out)}


def test_models_list_shows_found_models_with_what_they_run_as(
    stores: Stores, embedded_model_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    models = listed(capsys)
    ar, draft, projector = models[AR_NAME], models[DRAFT_NAME], models[PROJECTOR]
    assert ar["store"] == "ollama" and ar["runs_as"] == "ar" and ar["architecture"] == "llama"
    assert ar["quantization"] == "Q4_1" and ar["context_length"] == 8192
    assert ar["size_bytes"] == embedded_model_path.stat().st_size
    assert Path(str(ar["path"])).parent == stores.ollama / "blobs"
    assert draft["runs_as"] == "diffusion" and draft["store"] == "ollama"
    assert projector["runs_as"] is None and "vision projector" in str(projector["reason"])
    assert models[VISION_MODEL]["runs_as"] == "ar" and models[VISION_MODEL]["store"] == "lmstudio"
    assert models[HF_MODEL]["runs_as"] == "ar" and models[HF_MODEL]["store"] == "hf"
    assert "newengine:latest" not in models, "a layer that is no GGUF is skipped"
    assert models["sharpen-draft"]["present"], "the catalogue is listed as before"

    assert main(["models", "list"]) == 0
    out = capsys.readouterr().out
    assert "Found on this machine, used where they lie:" in out
    assert f"{AR_NAME:40} {'Ollama':14} runs as AR" in out and "llama, Q4_1, " in out and "context 8,192" in out
    assert f"{PROJECTOR:40} {'LM Studio':14} cannot run" in out
    assert "a vision projector (mmproj) for a multimodal model, not a language model" in out
    assert "1 file(s) in those stores skipped: `sharpen doctor` says why." in out


def test_use_by_ollama_name_completes_and_drafts_on_llama_cpp(
    stores: Stores, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["models", "use", AR_NAME, "--for", "complete"]) == 0
    assert main(["models", "use", DRAFT_NAME, "--for", "draft"]) == 0
    assert capsys.readouterr().out.splitlines() == [f"models.complete = {AR_NAME}", f"models.draft = {DRAFT_NAME}"]
    assert main(["models", "info", DRAFT_NAME, "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["runs_as"] == "diffusion" and info["in_use_for"] == ["draft"] and info["file"]["mask_token_id"] == 16
    assert main(["complete", "The capital of France is", "--max-tokens", "4", "--json"]) == 0
    completed = json.loads(capsys.readouterr().out)
    assert completed["model"] == AR_NAME and completed["text"]
    assert main(["draft", "Write a note.", "--tokens", "16", "--steps", "4", "--engine", "diffusion", "--json"]) == 0
    drafted = json.loads(capsys.readouterr().out)
    assert drafted["model"] == DRAFT_NAME and drafted["engine"] == "diffusion"
    assert main(["draft", "Write a note.", "--tokens", "8", "--engine", "ar", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["model"] == AR_NAME
    assert main(["models", "rm", AR_NAME]) == 1
    refused = capsys.readouterr().err
    assert f"{AR_NAME} is in Ollama's store: Sharpen reads other tools' stores, never deletes" in refused
    assert all(blob.is_file() for blob in (stores.ollama / "blobs").iterdir())


def test_a_short_name_means_the_one_runnable_file(stores: Stores, capsys: pytest.CaptureFixture[str]) -> None:
    """LM Studio's publisher/repo: the projector beside the model is passed over; the full name is stored."""
    assert main(["models", "use", "acme/vision-GGUF", "--for", "complete"]) == 0
    assert capsys.readouterr().out.strip() == f"models.complete = {VISION_MODEL}"
    assert main(["models", "use", "owner/smol-GGUF", "--for", "write"]) == 0
    assert capsys.readouterr().out.strip() == f"models.write = {HF_MODEL}"


def test_a_name_several_models_answer_to_is_one_error_line(
    stores: Stores, embedded_model_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    add_lmstudio_model(stores.lmstudio, "acme", "vision-GGUF", embedded_model_path, "smol-Q8_0.gguf")
    assert main(["models", "use", "acme/vision-GGUF", "--for", "complete"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("sharpen: error: 'acme/vision-GGUF' matches 3 found models: ")
    assert f"{VISION_MODEL} (LM Studio)" in err and "acme/vision-GGUF/smol-Q8_0.gguf (LM Studio)" in err
    assert not (Path(os.environ["SHARPEN_HOME"]) / "config" / "config.toml").exists(), "nothing was set"
    with pytest.raises(AmbiguousModelName):
        SharpenService.from_environment().models.resolve("acme/vision-GGUF")


def test_a_model_that_cannot_run_is_refused_with_its_reason(stores: Stores, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["models", "use", PROJECTOR, "--for", "complete"]) == 1
    err = capsys.readouterr().err.strip()
    assert err == (
        f"sharpen: error: {PROJECTOR} (LM Studio): is a vision projector (mmproj) for a multimodal model, "
        "not a language model"
    )
    assert main(["models", "use", AR_NAME, "--for", "draft"]) == 1
    assert capsys.readouterr().err.startswith(
        f"sharpen: error: {AR_NAME} (Ollama): is a 'llama' model, not a diffusion"
    )


def test_precedence_path_then_catalogue_then_found(
    stores: Stores, embedded_model_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    add_ollama_model(stores.ollama, "sharpen-draft", "latest", embedded_model_path)  # answers to "sharpen-draft"
    models = SharpenService.from_environment().models
    assert models.resolve("sharpen-draft").entry is not None, "a catalogue name wins over a found name"
    assert models.resolve("sharpen-draft:latest").found is not None
    monkeypatch.chdir(tmp_path)
    local = tmp_path / "acme" / "vision-GGUF" / "smol-Q4_1.gguf"
    local.parent.mkdir(parents=True)
    local.symlink_to(embedded_model_path)
    resolved = models.resolve(VISION_MODEL)
    assert resolved.found is None and resolved.path == Path(VISION_MODEL), "an existing path wins over a found name"


def test_a_configured_model_whose_file_is_gone_falls_back_to_the_embedded_one(
    stores: Stores, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["models", "use", DRAFT_NAME, "--for", "draft"]) == 0
    stores.draft_blob.unlink()  # `ollama rm`, or the store moved
    capsys.readouterr()
    assert main(["draft", "Write a note.", "--tokens", "16", "--steps", "4", "--engine", "diffusion"]) == 0
    err = capsys.readouterr().err
    assert f"models.draft '{DRAFT_NAME}': Ollama lists it, but its model layer sha256-" in err
    assert "drafts use sharpen-draft until it is back" in err
    config = (Path(os.environ["SHARPEN_HOME"]) / "config" / "config.toml").read_text()
    assert f'draft = "{DRAFT_NAME}"' in config, "the setting is kept"
    assert main(["draft", "Write a note.", "--tokens", "16", "--steps", "4", "--engine", "diffusion", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["model"] == "sharpen-draft"
    shutil.rmtree(stores.ollama / "manifests" / "registry.ollama.ai" / "acme")  # `ollama rm`
    assert main(["draft", "Write a note.", "--tokens", "16", "--steps", "4", "--engine", "diffusion"]) == 0
    err = capsys.readouterr().err
    assert f"models.draft '{DRAFT_NAME}': no file at that path, and no store holds a model of that name" in err
    assert main(["models", "use", DRAFT_NAME, "--for", "draft"]) == 1
    assert capsys.readouterr().err.startswith(f"sharpen: error: {DRAFT_NAME}: no such file")


def test_doctor_reports_each_store_its_models_and_what_it_skipped(stores: Stores) -> None:
    findings = {f.check: f for f in check_stores(SharpenService.from_environment().models)}
    ollama = findings["store: Ollama"]
    assert ollama.detail.startswith(f"{stores.ollama}: 2 runnable: ")
    assert f"{AR_NAME} (AR)" in ollama.detail and f"{DRAFT_NAME} (diffusion)" in ollama.detail
    assert "skipped: newengine:latest (is not a GGUF file" in ollama.detail
    lmstudio = findings["store: LM Studio"]
    assert f"not runnable: {PROJECTOR} (cannot run: a vision projector" in lmstudio.detail
    assert "HF cache" in findings["store: HF cache"].check
    assert ".cache/lm-studio/models" in findings["stores"].detail, "the older LM Studio folder is not there"
    assert findings["architectures"].status == "ok" and "llama" in findings["architectures"].facts["known"]


def test_models_folders_setting_adds_a_folder(
    tmp_path: Path, embedded_model_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "my-models"
    add_lmstudio_model(folder, "me", "smol", embedded_model_path, "smol.gguf")
    write_embedding_model(folder / "embed.gguf")
    assert main(["config", "set", "models.folders", str(folder)]) == 0
    capsys.readouterr()
    models = listed(capsys)
    assert models["me/smol/smol.gguf"]["store"] == "folder" and models["me/smol/smol.gguf"]["runs_as"] == "ar"
    assert models["embed.gguf"]["runs_as"] is None and "an embedding model (bert)" in str(
        models["embed.gguf"]["reason"]
    )


def test_architectures_are_read_from_the_llama_cpp_library() -> None:
    assert knows_architecture("llama") and knows_architecture("llada") and knows_architecture("dream")
    assert knows_architecture("qwen2"), "kept by the linker as the tail of a longer string"
    assert knows_architecture("notarealarch") is False
    assert len(known_architectures()) > 50


def test_split_parts_are_named() -> None:
    assert split_part("Qwen3-32B-Q4_K_M-00002-of-00003.gguf") == (2, 3)
    assert split_part("model.gguf") is None


def test_a_name_in_both_lmstudio_folders_is_listed_once(embedded_model_path: Path) -> None:
    current, older = Path.home() / ".lmstudio" / "models", Path.home() / ".cache" / "lm-studio" / "models"
    for root in (current, older):
        add_lmstudio_model(root, "me", "smol", embedded_model_path, "smol.gguf")
    models = SharpenService.from_environment().models
    found, skipped = models.found_models()
    assert [m.name for m in found] == ["me/smol/smol.gguf"] and found[0].file.path.is_relative_to(current)
    assert [(s.where, s.why) for s in skipped] == [("me/smol/smol.gguf", "listed already, from an earlier store")]
    assert models.resolve("me/smol").path == found[0].file.path
