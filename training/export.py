"""Write the trained model out: a GGUF that llama.cpp runs, and a LLaDA checkpoint folder for torch.

The GGUF is Sharpen's cacheable diffusion form: a `llama`-architecture file with
`llama.attention.causal = false`, a mask token and `diffusion.shift_logits = false` (the model predicts
in place, as LLaDA does), the BPE vocabulary and a chat template. Matrices are stored as Q8_0 (or F32),
norms as F32; the output layer is tied to the embedding, which llama.cpp's llama architecture supports
by leaving `output.weight` out. q and k rows are permuted from the module's Hugging Face rotary layout
into ggml's interleaved one, as llama.cpp's own converter does for LLaDA.

The checkpoint folder has LLaDA's config.json fields and weight names (models/hf_checkpoint.py,
models/transformer_spec.py), the tokenizer.json and a tokenizer_config.json with the chat template: the torch
backend serves it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from gguf import GGMLQuantizationType, GGUFWriter, LlamaFileType
from gguf.quants import quantize
from tokenizers import Tokenizer

from models.layouts import to_gguf
from models.transformer_spec import TransformerSpec, expected_tensors
from training.tokenizer import CHAT_TEMPLATE, gguf_vocabulary, special_ids

if TYPE_CHECKING:
    from training.model import ModelShape  # imports torch, which writing a GGUF does not need

ARCH = "llama"


def export_gguf(
    state: dict[str, np.ndarray], shape: ModelShape, tokenizer: Tokenizer, path: Path, *, q8: bool, name: str
) -> Path:
    """`state`: the model's weights as float32 numpy arrays by torch name; `shape`: its ModelShape."""
    ids = special_ids(tokenizer)
    tokens, types, merges = gguf_vocabulary(tokenizer)
    path.parent.mkdir(parents=True, exist_ok=True)
    writer = GGUFWriter(str(path), ARCH)
    writer.add_name(name)
    writer.add_context_length(shape.max_positions)
    writer.add_embedding_length(shape.width)
    writer.add_block_count(shape.layers)
    writer.add_feed_forward_length(shape.ffn)
    writer.add_head_count(shape.heads)
    writer.add_head_count_kv(shape.heads)
    writer.add_layer_norm_rms_eps(shape.norm_eps)
    writer.add_rope_dimension_count(shape.head_dim)
    writer.add_rope_freq_base(shape.rope_base)
    writer.add_vocab_size(shape.vocab_size)
    writer.add_file_type(LlamaFileType.MOSTLY_Q8_0 if q8 else LlamaFileType.ALL_F32)
    writer.add_bool(f"{ARCH}.attention.causal", False)
    writer.add_bool("diffusion.shift_logits", False)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("gpt-2")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(merges)
    writer.add_bos_token_id(ids.eos)
    writer.add_eos_token_id(ids.eos)
    writer.add_add_bos_token(False)
    writer.add_mask_token_id(ids.mask)
    writer.add_chat_template(CHAT_TEMPLATE)
    for gguf_name, array in _tensors(state, shape).items():
        if q8 and array.ndim == 2:
            writer.add_tensor(
                gguf_name, quantize(array, GGMLQuantizationType.Q8_0), raw_dtype=GGMLQuantizationType.Q8_0
            )
        else:
            writer.add_tensor(gguf_name, array.astype(np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def _tensors(state: dict[str, np.ndarray], shape: ModelShape) -> dict[str, np.ndarray]:
    heads = shape.heads
    tensors = to_gguf(state, heads, heads, ggml_rope=True)
    return {name: np.ascontiguousarray(array, dtype=np.float32) for name, array in tensors.items()}


def export_checkpoint(state: dict[str, np.ndarray], spec: TransformerSpec, tokenizer: Tokenizer, folder: Path) -> Path:
    """The same weights as a LLaDA checkpoint folder (safetensors under LLaDA's names, float32)."""
    from safetensors.numpy import save_file

    folder.mkdir(parents=True, exist_ok=True)
    named = {
        theirs: np.ascontiguousarray(state[ours], dtype=np.float32)
        for ours, (theirs, _) in expected_tensors(spec).items()
    }
    save_file(named, str(folder / "model.safetensors"))
    ids = special_ids(tokenizer)
    config = {
        "architectures": ["LLaDAModelLM"],
        "model_type": "llada",
        "d_model": spec.width,
        "n_heads": spec.heads,
        "n_kv_heads": spec.kv_heads,
        "n_layers": spec.layers,
        "mlp_hidden_size": spec.ffn,
        "vocab_size": spec.vocab_size,
        "embedding_size": spec.vocab_size,
        "rope_theta": spec.rope_theta,
        "rms_norm_eps": spec.norm_eps,
        "include_bias": False,
        "weight_tying": True,
        "block_type": "llama",
        "activation_type": "silu",
        "rope": True,
        "layer_norm_type": "rms",
        "mask_token_id": ids.mask,
        "eos_token_id": ids.eos,
        "max_sequence_length": spec.context_length,
        "torch_dtype": "float32",
    }
    (folder / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    tokenizer.save(str(folder / "tokenizer.json"))
    eos = tokenizer.id_to_token(ids.eos)
    tokenizer_config = {"bos_token": eos, "eos_token": eos, "add_bos_token": False, "chat_template": CHAT_TEMPLATE}
    (folder / "tokenizer_config.json").write_text(json.dumps(tokenizer_config, indent=2), encoding="utf-8")
    return folder
