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

MASK_TOKEN_ID = 16  # SmolLM2's "<empty_output>", as in bench/stand_in.py


def hf_rope_rows(weight: np.ndarray, heads: int) -> np.ndarray:
    rows, columns = weight.shape
    return weight.reshape(heads, rows // heads // 2, 2, columns).swapaxes(1, 2).reshape(rows, columns)


def _field(reader: GGUFReader, key: str) -> object:
    field = reader.fields.get(key)
    return None if field is None else field.contents()


def _tensors(reader: GGUFReader) -> dict[str, np.ndarray]:
    return {t.name: np.ascontiguousarray(dequantize(t.data, t.tensor_type), dtype=np.float32) for t in reader.tensors}


def _write_tokenizer(reader: GGUFReader, folder: Path, bos: str, eos: str) -> None:
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    tokens = list(_field(reader, "tokenizer.ggml.tokens"))  # type: ignore[arg-type]
    kinds = list(_field(reader, "tokenizer.ggml.token_type"))  # type: ignore[arg-type]
    merges = [tuple(m.split(" ", 1)) for m in _field(reader, "tokenizer.ggml.merges")]  # type: ignore[union-attr]
    tokenizer = Tokenizer(models.BPE(vocab={t: i for i, t in enumerate(tokens)}, merges=merges))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.add_special_tokens([AddedToken(t, special=True) for t, k in zip(tokens, kinds, strict=True) if k == 3])
    tokenizer.save(str(folder / "tokenizer.json"))
    config = {"bos_token": bos, "eos_token": eos, "chat_template": _field(reader, "tokenizer.chat_template")}
    (folder / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")


def _layers(tensors: dict[str, np.ndarray], heads: int, kv_heads: int) -> int:
    layers = 0
    while f"blk.{layers}.attn_q.weight" in tensors:
        tensors[f"blk.{layers}.attn_q.weight"] = hf_rope_rows(tensors[f"blk.{layers}.attn_q.weight"], heads)
        tensors[f"blk.{layers}.attn_k.weight"] = hf_rope_rows(tensors[f"blk.{layers}.attn_k.weight"], kv_heads)
        layers += 1
    return layers


def dream_from_smollm2(source: Path, folder: Path) -> Path:
    if (folder / "model.safetensors").is_file():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    reader = GGUFReader(source)
    heads = int(_field(reader, "llama.attention.head_count"))  # type: ignore[arg-type]
    kv_heads = int(_field(reader, "llama.attention.head_count_kv"))  # type: ignore[arg-type]
    tensors = _tensors(reader)
    layers = _layers(tensors, heads, kv_heads)
    width = tensors["token_embd.weight"].shape[1]
    kv_width = tensors["blk.0.attn_k.weight"].shape[0]
    named = {
        "model.embed_tokens.weight": tensors["token_embd.weight"],
        "model.norm.weight": tensors["output_norm.weight"],
    }
    names = {
        "attn_norm": "input_layernorm", "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj",
        "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj", "ffn_norm": "post_attention_layernorm",
        "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj",
    }  # fmt: skip
    for layer in range(layers):
        for ours, theirs in names.items():
            named[f"model.layers.{layer}.{theirs}.weight"] = tensors[f"blk.{layer}.{ours}.weight"]
        for part, size in (("q", width), ("k", kv_width), ("v", kv_width)):
            named[f"model.layers.{layer}.self_attn.{part}_proj.bias"] = np.zeros(size, dtype=np.float32)
    save_file(named, str(folder / "model.safetensors"))
    config = {
        "architectures": ["DreamModel"],
        "model_type": "Dream",
        "hidden_size": width,
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "num_hidden_layers": layers,
        "intermediate_size": tensors["blk.0.ffn_gate.weight"].shape[0],
        "vocab_size": tensors["token_embd.weight"].shape[0],
        "rope_theta": float(_field(reader, "llama.rope.freq_base")),  # type: ignore[arg-type]
        "rms_norm_eps": float(_field(reader, "llama.attention.layer_norm_rms_epsilon")),  # type: ignore[arg-type]
        "tie_word_embeddings": "output.weight" not in tensors,
        "mask_token_id": MASK_TOKEN_ID,
        "max_position_embeddings": 2048,
    }
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    _write_tokenizer(reader, folder, "<|im_start|>", "<|im_end|>")
    return folder


def llada_from_sharpen_draft(source: Path, folder: Path) -> Path:
    if (folder / "model.safetensors").is_file():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    reader = GGUFReader(source)
    heads = int(_field(reader, "llama.attention.head_count"))  # type: ignore[arg-type]
    tensors = _tensors(reader)
    layers = _layers(tensors, heads, heads)
    root = "model.transformer"
    named = {f"{root}.wte.weight": tensors["token_embd.weight"], f"{root}.ln_f.weight": tensors["output_norm.weight"]}
    names = {
        "attn_norm": "attn_norm", "attn_q": "q_proj", "attn_k": "k_proj", "attn_v": "v_proj",
        "attn_output": "attn_out", "ffn_norm": "ff_norm", "ffn_gate": "ff_proj", "ffn_up": "up_proj",
        "ffn_down": "ff_out",
    }  # fmt: skip
    for layer in range(layers):
        for ours, theirs in names.items():
            named[f"{root}.blocks.{layer}.{theirs}.weight"] = tensors[f"blk.{layer}.{ours}.weight"]
    tied = "output.weight" not in tensors
    if not tied:
        named[f"{root}.ff_out.weight"] = tensors["output.weight"]
    save_file(named, str(folder / "model.safetensors"))
    width = tensors["token_embd.weight"].shape[1]
    config = {
        "architectures": ["LLaDAModelLM"],
        "model_type": "llada",
        "d_model": width,
        "n_heads": heads,
        "n_kv_heads": heads,
        "n_layers": layers,
        "mlp_hidden_size": tensors["blk.0.ffn_gate.weight"].shape[0],
        "vocab_size": tensors["token_embd.weight"].shape[0],
        "rope_theta": float(_field(reader, "llama.rope.freq_base")),  # type: ignore[arg-type]
        "rms_norm_eps": float(_field(reader, "llama.attention.layer_norm_rms_epsilon")),  # type: ignore[arg-type]
        "weight_tying": tied,
        "mask_token_id": int(_field(reader, "tokenizer.ggml.mask_token_id")),  # type: ignore[arg-type]
        "max_sequence_length": int(_field(reader, "llama.context_length")),  # type: ignore[arg-type]
        "eos_token_id": int(_field(reader, "tokenizer.ggml.eos_token_id")),  # type: ignore[arg-type]
    }
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    tokens = list(_field(reader, "tokenizer.ggml.tokens"))  # type: ignore[arg-type]
    eos = tokens[config["eos_token_id"]]
    _write_tokenizer(reader, folder, eos, eos)
    return folder
