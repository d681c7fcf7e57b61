"""A 135M diffusion-form stand-in built from the embedded AR model's own weights, for cost benchmarks.

It has exactly the AR model's size and quantization, so a diffusion pass and an AR token are measured
on the same weights. In the block-causal models' layouts (SDAR's Qwen3, Fast-dLLM v2's Qwen2) it adds the
few small tensors those layouts carry (query and key norms of ones, zero biases). It is NOT a trained
diffusion model: its text and its confidences mean nothing beyond "what an AR model says when run
bidirectionally". Use it for timings, never for quality.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import gguf
import numpy as np

MASK_TOKEN_ID = 16
# Per-layer tensors a layout adds, from (width, kv_width, head_dim).
Layout = Callable[[int, int, int], dict[str, np.ndarray]]  # SmolLM2's "<empty_output>", unused in text


def write_stand_in(
    source: Path,
    target: Path,
    *,
    arch: str,
    causal: bool | None,
    shift: bool = True,
    extra: Layout | None = None,
) -> Path:
    """Copy `source` (a llama GGUF) as `arch` with a mask token, shifted logits (or not) and optional causal
    flag; `extra(width, kv_width, head_dim)` adds per-layer tensors the layout needs (Qwen2's biases, Qwen3's query
    and key norms)."""
    if target.exists():
        return target
    reader = gguf.GGUFReader(source)
    target.parent.mkdir(parents=True, exist_ok=True)
    writer = gguf.GGUFWriter(str(target), arch)
    for field in reader.fields.values():
        if field.name == gguf.Keys.General.ARCHITECTURE or field.name.startswith("GGUF."):
            continue
        name = f"{arch}.{field.name.removeprefix('llama.')}" if field.name.startswith("llama.") else field.name
        value_type = field.types[0]
        sub_type = field.types[-1] if value_type == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(name, field.contents(), value_type, sub_type=sub_type)
    writer.add_mask_token_id(MASK_TOKEN_ID)
    writer.add_bool("diffusion.shift_logits", shift)  # an AR model predicts the next position
    if causal is not None:
        writer.add_bool(f"{arch}.attention.causal", causal)
    added = _layer_tensors(reader, extra) if extra else {}
    for tensor in reader.tensors:
        writer.add_tensor_info(
            tensor.name, tensor.data.shape, tensor.data.dtype, tensor.data.nbytes, tensor.tensor_type
        )
    for name, array in added.items():
        writer.add_tensor_info(name, array.shape, array.dtype, array.nbytes, gguf.GGMLQuantizationType.F32)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    for tensor in reader.tensors:
        writer.write_tensor_data(tensor.data)
    for array in added.values():
        writer.write_tensor_data(array)
    writer.close()
    return target


def copy_tokenizer(source: Path, writer: gguf.GGUFWriter, vocab_size: int) -> None:
    """Write `source`'s tokenizer (a GGUF's tokenizer.* keys) into `writer`, its token list padded up to
    `vocab_size` (a stand-in of a model with a larger vocabulary: the ids past the source's never come out of
    its text, but the output layer and the sampler have the real width). The padding tokens are ordinary ones
    that read "[PAD123]": as unused tokens they read as empty pieces, which the sampler's blank-lines rule
    weighs at every pass (an empty piece may end a blank line): the 1.7B shape's draft spent 2.9 of its 25.1 s
    in a rule that a real vocabulary's few short pieces keep cheap."""
    fields = gguf.GGUFReader(source).fields
    for field in fields.values():
        if not field.name.startswith("tokenizer."):
            continue
        contents = field.contents()
        if field.name == "tokenizer.ggml.tokens":
            contents = [*contents, *(f"[PAD{i}]" for i in range(len(contents), vocab_size))]
        elif field.name == "tokenizer.ggml.token_type":
            contents = [*contents, *[int(gguf.TokenType.NORMAL)] * (vocab_size - len(contents))]
        value_type = field.types[0]
        sub_type = field.types[-1] if value_type == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, contents, value_type, sub_type=sub_type)


def _layer_tensors(reader: gguf.GGUFReader, extra: Layout) -> dict[str, np.ndarray]:
    fields = reader.fields
    layers = int(fields["llama.block_count"].contents())
    width = int(fields["llama.embedding_length"].contents())
    head_dim = width // int(fields["llama.attention.head_count"].contents())
    kv_width = head_dim * int(fields["llama.attention.head_count_kv"].contents())
    return {
        f"blk.{layer}.{name}": array
        for layer in range(layers)
        for name, array in extra(width, kv_width, head_dim).items()
    }


def qwen2_biases(width: int, kv_width: int, head_dim: int) -> dict[str, np.ndarray]:
    """Fast-dLLM v2's layout (Qwen2.5): query, key and value biases, zero here."""
    return {
        "attn_q.bias": np.zeros(width, dtype=np.float32),
        "attn_k.bias": np.zeros(kv_width, dtype=np.float32),
        "attn_v.bias": np.zeros(kv_width, dtype=np.float32),
    }


def qwen3_norms(width: int, kv_width: int, head_dim: int) -> dict[str, np.ndarray]:
    """SDAR's layout (Qwen3): per-head query and key norms, ones here."""
    return {
        "attn_q_norm.weight": np.ones(head_dim, dtype=np.float32),
        "attn_k_norm.weight": np.ones(head_dim, dtype=np.float32),
    }
