"""A Hugging Face checkpoint folder as the draft model: `sharpen models use`, `draft`, `inspect`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.cli import main
from app.service import SharpenService
from app.storage.config import load_config
from app.storage.paths import sharpen_paths
from models.errors import UnsupportedModel


def test_inspect_a_checkpoint_folder(llada_checkpoint: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", str(llada_checkpoint), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["format"] == "hf-safetensors" and summary["architecture"] == "llada"
    assert summary["memory_gib"]["nf4"] < summary["memory_gib"]["fp32"]


@pytest.mark.parametrize("quantization", ["none", "nf4"])
def test_draft_with_a_checkpoint_folder(
    dream_checkpoint: Path, quantization: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["config", "set", "models.draft", str(dream_checkpoint)]) == 0
    assert main(["config", "set", "router.policy", "quality"]) == 0
    assert main(["config", "set", "diffusion.quantization", quantization]) == 0
    assert main(["config", "set", "diffusion.cache", "dual"]) == 0
    capsys.readouterr()
    assert main(["draft", "Write a note to Sam.", "--tokens", "32", "--steps", "8", "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["passes"] == 8 and payload["tokens"]["canvas"] == 32 and payload["text"]


def test_a_broken_checkpoint_is_refused_before_the_config_changes(llada_checkpoint: Path, tmp_path: Path) -> None:
    service = SharpenService(load_config(sharpen_paths().config_file), sharpen_paths())
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text(json.dumps({"architectures": ["GPT2LMHeadModel"]}))
    with pytest.raises(UnsupportedModel, match="not a LLaDA or Dream checkpoint"):
        service.use_model("draft", str(broken))
    with pytest.raises(UnsupportedModel, match="autoregressive"):
        service.use_model("complete", str(llada_checkpoint))
    assert service.config.models.draft == "sharpen-draft"
    service.use_model("draft", str(llada_checkpoint))
    assert load_config(sharpen_paths().config_file).models.draft == str(llada_checkpoint)
    assert service.engines.diffusion().backend.backend == "torch"


def test_calibrate_with_a_checkpoint_folder(llada_checkpoint: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The torch backend answers what calibration asks of every draft backend (it once had no
    `uses_prefix_cache`, now `cache_mode`, and `sharpen calibrate` ended in an AttributeError)."""
    assert main(["config", "set", "models.draft", str(llada_checkpoint)]) == 0
    assert main(["config", "set", "diffusion.cache", "prefix"]) == 0
    capsys.readouterr()
    assert main(["calibrate", "--quick"]) == 0
    profile = capsys.readouterr().out
    assert 'model = "tiny-llada-hf"' in profile and 'cache = "prefix"' in profile
