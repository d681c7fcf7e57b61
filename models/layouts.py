"""How the same transformer weights are named and ordered in Sharpen's module and in GGUF files.

Sharpen's module (models/transformer.py) keeps Hugging Face's rotary layout (rotate_half: each head's
q and k rows in two halves); ggml's "normal" rope pairs rows up interleaved, so llama.cpp's converter
permutes q and k rows for LLaDA and llama, and Sharpen does the same both ways. Works on numpy arrays
and torch tensors alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    import numpy as np
    import torch

# Constrained rather than bound: each function below is checked once for numpy arrays, once for tensors.
T = TypeVar("T", "np.ndarray", "torch.Tensor")

GGUF_TOP_NAMES = {
    "embed.weight": "token_embd.weight",
    "norm.weight": "output_norm.weight",
    "output.weight": "output.weight",
}
GGUF_BLOCK_NAMES = {
    "attn_norm.weight": "attn_norm.weight",
    "attention.q.weight": "attn_q.weight",
    "attention.k.weight": "attn_k.weight",
    "attention.v.weight": "attn_v.weight",
    "attention.o.weight": "attn_output.weight",
    "attention.q.bias": "attn_q.bias",
    "attention.k.bias": "attn_k.bias",
    "attention.v.bias": "attn_v.bias",
    "attention.q_norm.weight": "attn_q_norm.weight",
    "attention.k_norm.weight": "attn_k_norm.weight",
    "ffn_norm.weight": "ffn_norm.weight",
    "gate.weight": "ffn_gate.weight",
    "up.weight": "ffn_up.weight",
    "down.weight": "ffn_down.weight",
}


def ggml_rope_rows(weight: T, heads: int) -> T:
    """Hugging Face's rotate_half row order -> ggml's interleaved rotary pairs."""
    rows, columns = weight.shape
    return weight.reshape(heads, 2, rows // heads // 2, columns).swapaxes(1, 2).reshape(rows, columns)


def hf_rope_rows(weight: T, heads: int) -> T:
    """ggml's interleaved rotary pairs -> Hugging Face's rotate_half row order (the inverse)."""
    rows, columns = weight.shape
    return weight.reshape(heads, rows // heads // 2, 2, columns).swapaxes(1, 2).reshape(rows, columns)


def gguf_name(ours: str) -> str:
    """The GGUF name of a Sharpen parameter name: "blocks.3.attention.q.weight" -> "blk.3.attn_q.weight"."""
    if ours.startswith("blocks."):
        _, layer, rest = ours.split(".", 2)
        return f"blk.{layer}.{GGUF_BLOCK_NAMES[rest]}"
    return GGUF_TOP_NAMES[ours]


def to_gguf(state: Mapping[str, T], heads: int, kv_heads: int, *, ggml_rope: bool) -> dict[str, T]:
    """Sharpen-named weights -> GGUF-named ones; with `ggml_rope`, q and k rows in ggml's rope layout
    (llama and LLaDA files; Dream keeps Hugging Face's, as llama.cpp's converter does)."""
    converted: dict[str, T] = {}
    for ours, tensor in state.items():
        if ggml_rope and ours.endswith("attention.q.weight"):
            tensor = ggml_rope_rows(tensor, heads)
        elif ggml_rope and ours.endswith("attention.k.weight"):
            tensor = ggml_rope_rows(tensor, kv_heads)
        converted[gguf_name(ours)] = tensor
    return converted
