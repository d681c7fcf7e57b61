"""Hugging Face checkpoint folders made from GGUF weights, for benchmarking the torch backend.

- `dream_from_smollm2`: SmolLM2-135M-Instruct (dequantized from the embedded Q4_1 file) in Dream's
  layout, zero QKV biases, shifted logits: the same 135M stand-in as bench/stand_in.py. Timings only.
- `llada_from_sharpen_draft`: the embedded, trained sharpen-draft model (dequantized from Q8_0) in
  LLaDA's layout: a real diffusion model, so cached-versus-full agreement on it means something.
ggml stores q and k rows with rotary pairs interleaved; Hugging Face checkpoints keep the halves
apart (rotate_half), so those rows are permuted back, the inverse of what llama.cpp's converter does.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize
from safetensors.numpy import save_file

from models.hf_checkpoint import spec_from_config
from models.layouts import gguf_name, hf_rope_rows
from models.transformer_spec import expected_tensors

MASK_TOKEN_ID = 16  # SmolLM2's "<empty_output>", as in bench/stand_in.py


def _field(reader: GGUFReader, key: str) -> object:
    field = reader.fields.get(key)
    return None if field is None else field.contents()


def _int(reader: GGUFReader, key: str) -> int:
    value = _field(reader, key)
    if not isinstance(value, int):
        raise TypeError(f"GGUF field {key} is {value!r}, not an integer")
    return value


def _float(reader: GGUFReader, key: str) -> float:
    value = _field(reader, key)
    if not isinstance(value, int | float):
        raise TypeError(f"GGUF field {key} is {value!r}, not a number")
    return float(value)


def _strings(reader: GGUFReader, key: str) -> list[str]:
    value = _field(reader, key)
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise TypeError(f"GGUF field {key} is not an array of strings")
    return value


def _ints(reader: GGUFReader, key: str) -> list[int]:
    value = _field(reader, key)
    if not isinstance(value, list) or not all(isinstance(item, int) for item in value):
        raise TypeError(f"GGUF field {key} is not an array of integers")
    return value


def _tensors(reader: GGUFReader) -> dict[str, np.ndarray]:
    return {t.name: np.ascontiguousarray(dequantize(t.data, t.tensor_type), dtype=np.float32) for t in reader.tensors}


def _write_tokenizer(reader: GGUFReader, folder: Path, bos: str, eos: str) -> None:
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    tokens = _strings(reader, "tokenizer.ggml.tokens")
    kinds = _ints(reader, "tokenizer.ggml.token_type")
    merges = [(left, right) for left, right in (m.split(" ", 1) for m in _strings(reader, "tokenizer.ggml.merges"))]
    tokenizer = Tokenizer(models.BPE(vocab={t: i for i, t in enumerate(tokens)}, merges=merges))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.add_special_tokens([AddedToken(t, special=True) for t, k in zip(tokens, kinds, strict=True) if k == 3])
    tokenizer.save(str(folder / "tokenizer.json"))
    config = {"bos_token": bos, "eos_token": eos, "chat_template": _field(reader, "tokenizer.chat_template")}
    (folder / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")


def _layer_count(tensors: dict[str, np.ndarray]) -> int:
    layers = 0
    while f"blk.{layers}.attn_q.weight" in tensors:
        layers += 1
    return layers


def _write_weights(tensors: dict[str, np.ndarray], config: dict[str, object], folder: Path) -> None:
    """Every tensor the checkpoint's spec expects, under its real name, from the GGUF's tensors (q and k
    rows back into Hugging Face's rotary layout; biases a GGUF lacks as zeros)."""
    spec = spec_from_config(config, folder)
    named: dict[str, np.ndarray] = {}
    for ours, (theirs, shape) in expected_tensors(spec).items():
        tensor = tensors.get(gguf_name(ours))
        if tensor is None:
            tensor = np.zeros(shape, dtype=np.float32)
        elif ours.endswith("attention.q.weight"):
            tensor = hf_rope_rows(tensor, spec.heads)
        elif ours.endswith("attention.k.weight"):
            tensor = hf_rope_rows(tensor, spec.kv_heads)
        named[theirs] = np.ascontiguousarray(tensor)
    save_file(named, str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")


def dream_from_smollm2(source: Path, folder: Path) -> Path:
    if (folder / "model.safetensors").is_file():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    reader = GGUFReader(source)
    tensors = _tensors(reader)
    config = {
        "architectures": ["DreamModel"],
        "model_type": "Dream",
        "hidden_size": tensors["token_embd.weight"].shape[1],
        "num_attention_heads": _int(reader, "llama.attention.head_count"),
        "num_key_value_heads": _int(reader, "llama.attention.head_count_kv"),
        "num_hidden_layers": _layer_count(tensors),
        "intermediate_size": tensors["blk.0.ffn_gate.weight"].shape[0],
        "vocab_size": tensors["token_embd.weight"].shape[0],
        "rope_theta": _float(reader, "llama.rope.freq_base"),
        "rms_norm_eps": _float(reader, "llama.attention.layer_norm_rms_epsilon"),
        "tie_word_embeddings": "output.weight" not in tensors,
        "mask_token_id": MASK_TOKEN_ID,
        "max_position_embeddings": 2048,
    }
    _write_weights(tensors, config, folder)
    _write_tokenizer(reader, folder, "<|im_start|>", "<|im_end|>")
    return folder


def llada_from_sharpen_draft(source: Path, folder: Path) -> Path:
    if (folder / "model.safetensors").is_file():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    reader = GGUFReader(source)
    tensors = _tensors(reader)
    heads = _int(reader, "llama.attention.head_count")
    eos_id = _int(reader, "tokenizer.ggml.eos_token_id")
    config = {
        "architectures": ["LLaDAModelLM"],
        "model_type": "llada",
        "d_model": tensors["token_embd.weight"].shape[1],
        "n_heads": heads,
        "n_kv_heads": heads,
        "n_layers": _layer_count(tensors),
        "mlp_hidden_size": tensors["blk.0.ffn_gate.weight"].shape[0],
        "vocab_size": tensors["token_embd.weight"].shape[0],
        "rope_theta": _float(reader, "llama.rope.freq_base"),
        "rms_norm_eps": _float(reader, "llama.attention.layer_norm_rms_epsilon"),
        "weight_tying": "output.weight" not in tensors,
        "block_type": "llama",
        "layer_norm_type": "rms",
        "activation_type": "silu",
        "rope": True,
        "mask_token_id": _int(reader, "tokenizer.ggml.mask_token_id"),
        "max_sequence_length": _int(reader, "llama.context_length"),
        "eos_token_id": eos_id,
    }
    _write_weights(tensors, config, folder)
    eos = _strings(reader, "tokenizer.ggml.tokens")[eos_id]
    _write_tokenizer(reader, folder, eos, eos)
    return folder
