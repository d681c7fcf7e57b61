"""Recognising Hugging Face diffusion checkpoints without torch: config, shards, shapes, memory, fit."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from fixture_checkpoints import dream_config, llada_config, write_checkpoint

from engines.diffusion.hf.placement import ModelDoesNotFit, module_sizes, place_on_gpu, split_by_budget
from models.errors import MissingModelFile, UnsupportedModel
from models.hf_checkpoint import CheckpointError, inspect_checkpoint, spec_from_config
from models.transformer_spec import estimate_memory

GIB = 1024**3

# The real LLaDA-8B-Instruct config.json: the fields that change what the model computes.
LLADA_8B = {
    "architectures": ["LLaDAModelLM"],
    "d_model": 4096,
    "n_heads": 32,
    "n_kv_heads": 32,
    "n_layers": 32,
    "mlp_hidden_size": 12288,
    "vocab_size": 126464,
    "embedding_size": 126464,
    "rope_theta": 500000.0,
    "rms_norm_eps": 1e-05,
    "include_bias": False,
    "weight_tying": False,
    "block_type": "llama",
    "layer_norm_type": "rms",
    "activation_type": "silu",
    "rope": True,
    "rope_full_precision": True,
    "alibi": False,
    "attention_layer_norm": False,
    "bias_for_layer_norm": False,
    "include_qkv_bias": False,
    "input_emb_norm": False,
    "scale_logits": False,
    "multi_query_attention": None,
    "layer_norm_with_affine": True,
    "mask_token_id": 126336,
    "max_sequence_length": 4096,
}


def copy_of(folder: Path, tmp_path: Path) -> Path:
    target = tmp_path / folder.name
    shutil.copytree(folder, target)
    return target


def test_a_sharded_llada_checkpoint_is_recognised(llada_checkpoint: Path) -> None:
    info = inspect_checkpoint(llada_checkpoint)
    assert info.spec.architecture == "llada" and not info.spec.shift_logits
    assert len(info.files) == 2
    embeddings_and_output = 2 * 49152 * 64
    per_layer = 2 * 64 + 4 * 64 * 64 + 3 * 128 * 64  # two norms, q k v o, gate up down
    assert info.parameter_count == embeddings_and_output + 64 + 2 * per_layer
    summary = info.summary()
    assert summary["architecture"] == "llada" and summary["mask_token_id"] == 16
    assert set(summary["memory_gib"]) == {"fp32", "bf16", "nf4", "int8"}


def test_dream_is_recognised_with_its_shift_and_grouped_heads(dream_checkpoint: Path) -> None:
    spec = inspect_checkpoint(dream_checkpoint).spec
    assert (spec.architecture, spec.shift_logits, spec.qkv_bias, spec.kv_heads) == ("dream", True, True, 2)


def test_memory_estimate_matches_what_llada_8b_takes_in_nf4() -> None:
    # shared/reference.md: dlmserve runs LLaDA-8B in NF4 with double quantization in about 5.6 GB.
    memory = estimate_memory(spec_from_config(LLADA_8B, Path("llada-8b")))
    assert 5.3e9 < memory.weights["nf4"] < 5.9e9
    assert 15.5e9 < memory.weights["bf16"] < 16.5e9  # 8.0B parameters in 2 bytes
    assert memory.weights["int8"] < memory.weights["bf16"] < memory.weights["fp32"]


def test_a_missing_shard_is_named(llada_checkpoint: Path, tmp_path: Path) -> None:
    folder = copy_of(llada_checkpoint, tmp_path)
    (folder / "model-00002-of-00002.safetensors").unlink()
    with pytest.raises(MissingModelFile, match=r"missing 1 of its 2 weight shards.*model-00002-of-00002"):
        inspect_checkpoint(folder)


def test_a_config_missing_a_field_is_named(llada_checkpoint: Path, tmp_path: Path) -> None:
    folder = copy_of(llada_checkpoint, tmp_path)
    config = llada_config()
    del config["d_model"]
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match=r"config\.json has no 'd_model'"):
        inspect_checkpoint(folder)


def test_weights_that_do_not_match_the_config_are_refused(llada_checkpoint: Path, tmp_path: Path) -> None:
    folder = copy_of(llada_checkpoint, tmp_path)
    (folder / "config.json").write_text(json.dumps(llada_config(mlp_hidden_size=256)))
    with pytest.raises(CheckpointError, match=r"ff_proj.weight has shape \[128, 64\], config.json implies \[256, 64\]"):
        inspect_checkpoint(folder)


def test_weights_missing_from_the_shards_are_refused(tmp_path: Path) -> None:
    folder = write_checkpoint(tmp_path / "dream", "dream", config=dream_config(num_hidden_layers=3))
    with pytest.raises(CheckpointError, match=r"model\.layers\.2\.input_layernorm\.weight is missing"):
        inspect_checkpoint(folder)


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2"}, "not a LLaDA or Dream checkpoint"),
        ({"model_type": "llada_moe", "architectures": ["LLaDAMoEModelLM"]}, "not a LLaDA or Dream checkpoint"),
    ],
)
def test_an_unknown_architecture_is_refused(tmp_path: Path, config: dict[str, object], message: str) -> None:
    folder = tmp_path / "other"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(UnsupportedModel, match=message):
        inspect_checkpoint(folder)


def test_corrupt_files_are_refused(llada_checkpoint: Path, tmp_path: Path) -> None:
    folder = copy_of(llada_checkpoint, tmp_path)
    (folder / "config.json").write_text("{not json")
    with pytest.raises(CheckpointError, match="not valid JSON"):
        inspect_checkpoint(folder)
    (folder / "config.json").write_text(json.dumps(llada_config()))
    (folder / "model-00001-of-00002.safetensors").write_bytes(b"\xff" * 64)
    with pytest.raises(CheckpointError, match="safetensors"):
        inspect_checkpoint(folder)


def test_a_folder_without_weights_or_config_says_what_it_lacks(tmp_path: Path) -> None:
    with pytest.raises(MissingModelFile, match=r"no such checkpoint folder"):
        inspect_checkpoint(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(MissingModelFile, match=r"has no config\.json"):
        inspect_checkpoint(tmp_path / "empty")
    (tmp_path / "empty" / "config.json").write_text(json.dumps(llada_config()))
    with pytest.raises(MissingModelFile, match=r"no model\.safetensors"):
        inspect_checkpoint(tmp_path / "empty")


def test_gpu_placement_fills_the_gpu_in_order_and_offloads_the_rest() -> None:
    spec = spec_from_config(LLADA_8B, Path("llada-8b"))
    sizes = module_sizes(spec, 2, "nf4")
    plan = place_on_gpu(sizes, "cuda:0", int(4 * GIB), offload=True)
    on_gpu = [name for name, device in plan.devices.items() if device == "cuda:0" and name != "rotary"]
    assert on_gpu[0] == "embed" and plan.is_split
    first_offloaded = plan.offloaded()[0]
    assert first_offloaded.startswith("blocks.") and all(d == "cpu" for d in list(plan.devices.values())[-3:-1])
    assert plan.device_map()["embed"] == 0
    whole = place_on_gpu(sizes, "cuda:0", int(6 * GIB), offload=False)
    assert not whole.is_split
    with pytest.raises(ModelDoesNotFit, match=r"nf4.*offload"):
        place_on_gpu(module_sizes(spec, 2, "none"), "cuda:0", int(12 * GIB), offload=False)
    with pytest.raises(ModelDoesNotFit, match="not even the embeddings"):
        place_on_gpu(sizes, "cuda:0", int(0.5 * GIB), offload=True)
    assert split_by_budget([("a", 5), ("b", 5), ("c", 1)], 6, "cuda:0") == {"a": "cuda:0", "b": "cpu", "c": "cpu"}


@pytest.mark.parametrize(
    ("architecture", "switch", "value"),
    [
        ("llada", "include_bias", True),
        ("llada", "bias_for_layer_norm", True),
        ("llada", "layer_norm_with_affine", False),
        ("llada", "attention_layer_norm", True),
        ("llada", "alibi", True),
        ("llada", "rope", False),
        ("llada", "activation_type", "swiglu"),
        ("llada", "multi_query_attention", True),
        ("llada", "block_type", "sequential"),
        ("llada", "layer_norm_type", "default"),
        ("dream", "hidden_act", "gelu"),
        ("dream", "rope_scaling", {"type": "linear", "factor": 2.0}),
        ("dream", "use_sliding_window", True),
    ],
)
def test_a_switch_sharpen_does_not_compute_is_refused_by_name(
    tmp_path: Path, architecture: str, switch: str, value: object
) -> None:
    config = (llada_config if architecture == "llada" else dream_config)(**{switch: value})
    with pytest.raises(UnsupportedModel, match=rf"sets {switch} = .*does not compute"):
        spec_from_config(config, tmp_path)


def test_the_released_switches_load() -> None:
    spec = spec_from_config({**LLADA_8B, "rope": True, "alibi": False, "scale_logits": False}, Path("x"))
    assert spec.embedding_scale == 1.0 == spec.logit_scale and not spec.qkv_bias
    scaled = spec_from_config({**LLADA_8B, "input_emb_norm": True, "scale_logits": True}, Path("x"))
    assert scaled.embedding_scale == pytest.approx(64.0) and scaled.logit_scale == pytest.approx(1 / 64)


def test_a_missing_key_means_what_the_reference_assumes(tmp_path: Path) -> None:
    # LLaDA's ModelConfig defaults rope to False: a config that leaves it out is not a rotary model.
    config = {key: value for key, value in LLADA_8B.items() if key != "rope"}
    with pytest.raises(UnsupportedModel, match=r"sets rope = false in config.json \(by leaving it out\)"):
        spec_from_config(config, tmp_path)
    untied = {key: value for key, value in LLADA_8B.items() if key != "weight_tying"}
    assert spec_from_config(untied, tmp_path).tied_output, "weight_tying defaults to true in the reference"
