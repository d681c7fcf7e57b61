"""Write the trained model as a GGUF that llama.cpp runs: Sharpen's cacheable diffusion form.

A `llama`-architecture file with `llama.attention.causal = false`, a mask token and
`diffusion.shift_logits = false` (the model predicts in place, as LLaDA does), the BPE vocabulary and a
chat template. Matrices are stored as Q8_0 (or F32), norms as F32; the output layer is tied to the
embedding, which llama.cpp's llama architecture supports by leaving `output.weight` out.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from gguf import GGMLQuantizationType, GGUFWriter, LlamaFileType
from gguf.quants import quantize
from tokenizers import Tokenizer

from models.training.tokenizer import CHAT_TEMPLATE, gguf_vocabulary, special_ids

ARCH = "llama"


def export_gguf(
    state: dict[str, np.ndarray], shape: object, tokenizer: Tokenizer, path: Path, *, q8: bool, name: str
) -> Path:
    """`state`: the model's weights as float32 numpy arrays by torch name; `shape`: its ModelShape."""
    ids = special_ids(tokenizer)
    tokens, types, merges = gguf_vocabulary(tokenizer)
    path.parent.mkdir(parents=True, exist_ok=True)
    writer = GGUFWriter(str(path), ARCH)
    writer.add_name(name)
    writer.add_context_length(shape.max_positions)  # type: ignore[attr-defined]
    writer.add_embedding_length(shape.width)  # type: ignore[attr-defined]
    writer.add_block_count(shape.layers)  # type: ignore[attr-defined]
    writer.add_feed_forward_length(shape.ffn)  # type: ignore[attr-defined]
    writer.add_head_count(shape.heads)  # type: ignore[attr-defined]
    writer.add_head_count_kv(shape.heads)  # type: ignore[attr-defined]
    writer.add_layer_norm_rms_eps(shape.norm_eps)  # type: ignore[attr-defined]
    writer.add_rope_dimension_count(shape.head_dim)  # type: ignore[attr-defined]
    writer.add_rope_freq_base(shape.rope_base)  # type: ignore[attr-defined]
    writer.add_vocab_size(shape.vocab_size)  # type: ignore[attr-defined]
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


def _tensors(state: dict[str, np.ndarray], shape: object) -> dict[str, np.ndarray]:
    names = {"token_embd.weight": "embed.weight", "output_norm.weight": "norm.weight"}
    for layer in range(shape.layers):  # type: ignore[attr-defined]
        ours = f"blocks.{layer}"
        theirs = f"blk.{layer}"
        names |= {
            f"{theirs}.attn_norm.weight": f"{ours}.attn_norm.weight",
            f"{theirs}.attn_q.weight": f"{ours}.q.weight",
            f"{theirs}.attn_k.weight": f"{ours}.k.weight",
            f"{theirs}.attn_v.weight": f"{ours}.v.weight",
            f"{theirs}.attn_output.weight": f"{ours}.o.weight",
            f"{theirs}.ffn_norm.weight": f"{ours}.ffn_norm.weight",
            f"{theirs}.ffn_gate.weight": f"{ours}.gate.weight",
            f"{theirs}.ffn_up.weight": f"{ours}.up.weight",
            f"{theirs}.ffn_down.weight": f"{ours}.down.weight",
        }
    return {
        gguf_name: np.ascontiguousarray(state[torch_name], dtype=np.float32) for gguf_name, torch_name in names.items()
    }
