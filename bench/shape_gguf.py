"""Random-weight GGUFs of a real model's shape, in the types a user pulls, for cost benchmarks only.

A shape (width, layers, heads, feed-forward width, vocabulary, tied embeddings, the layout's extra tensors)
is written twice from the same weights: as the causal model AR decoding runs, and as Sharpen's cacheable
diffusion form (`{arch}.attention.causal = false`, a mask token, the logit shift), which llama.cpp runs under
every cache mode. The quantized blocks are random bytes with small, finite scales, written as they are drawn:
no float weights are made or quantized, so a 1.7B file takes seconds, and gguf-py needs no quantizer for the
k-quants (it has none for Q4_K and Q6_K). The vocabulary is SmolLM2's tokenizer (bench/stand_in.py reads it)
padded to the shape's size with tokens that read "[PAD123]", so the output layer and the sampler work on the
real width.
Timings only: the weights are noise.

Type mixes follow llama.cpp's quantizer (llama_tensor_get_type) for the file types named: Q4_K_M keeps the
output (or, tied, the embedding) at Q6_K, and at Q6_K the value projections and the feed-forward down
projections of the first and last eighth of the layers and of every third between; a row that is not a
whole number of 256-value super-blocks falls back to Q5_0 (for Q4_K) or Q8_0 (for Q6_K), as llama.cpp's does.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import gguf
import numpy as np
from stand_in import MASK_TOKEN_ID, Layout, copy_tokenizer

Q = gguf.GGMLQuantizationType
# Byte offsets of each block's float16 scales (d, and dmin or m where the type has one).
SCALE_OFFSETS: dict[Q, tuple[int, ...]] = {
    Q.Q4_0: (0,),
    Q.Q4_1: (0, 2),
    Q.Q5_0: (0,),
    Q.Q5_1: (0, 2),
    Q.Q8_0: (0,),
    Q.Q4_K: (0, 2),
    Q.Q5_K: (0, 2),
    Q.Q6_K: (208,),
}
# What llama.cpp quantizes a k-quant tensor to when its rows are not whole super-blocks.
FALLBACK = {Q.Q4_K: Q.Q5_0, Q.Q5_K: Q.Q5_1, Q.Q6_K: Q.Q8_0}
FILE_TYPES = {
    "Q4_0": gguf.LlamaFileType.MOSTLY_Q4_0,
    "Q8_0": gguf.LlamaFileType.MOSTLY_Q8_0,
    "Q4_K_M": gguf.LlamaFileType.MOSTLY_Q4_K_M,
}
SCALE = np.float16(0.002)


@dataclass(frozen=True)
class Shape:
    """A model's shape as its config.json gives it, and the llama.cpp architecture that computes it."""

    label: str
    arch: str  # qwen2, qwen3 or llama (LLaDA's cacheable twin is a llama model)
    vocab: int
    width: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn: int
    tied: bool  # no output matrix: the embedding is read back as the output layer
    shift: bool  # row i of the logits predicts position i + 1 (Dream, Fast-dLLM v2), not i (LLaDA, SDAR)
    layout: Layout | None = None  # per-layer tensors the layout adds (Qwen2's biases, Qwen3's norms)
    rope_base: float = 1_000_000.0


@dataclass(frozen=True)
class TensorSpec:
    name: str
    shape: tuple[int, ...]  # numpy order: rows, then the row's length
    kind: Q


def _more_bits(layer: int, layers: int) -> bool:
    """llama.cpp's use_more_bits: the first and last eighth of the layers, and every third between."""
    return layer < layers // 8 or layer >= 7 * layers // 8 or (layer - layers // 8) % 3 == 2


def tensor_kind(file_type: str, role: str, layer: int, layers: int, row: int) -> Q:
    """The type of a matrix of `role` (q, k, v, o, gate, up, down, embd, output) with rows of `row` values."""
    if file_type in Q.__members__ and file_type not in FILE_TYPES:  # one type for every matrix (a kernel probe)
        kind: Q = Q.__members__[file_type]
    elif file_type in ("Q4_0", "Q8_0"):
        kind = Q.Q4_0 if file_type == "Q4_0" else Q.Q8_0
        if role == "output":  # llama.cpp keeps the output layer at Q6_K (Q8_0 files stay Q8_0)
            kind = Q.Q6_K if file_type == "Q4_0" else Q.Q8_0
    elif file_type == "Q4_K_M":
        more_bits = role == "output" or (role in ("v", "down") and _more_bits(layer, layers))
        kind = Q.Q6_K if more_bits else Q.Q4_K
    else:
        raise ValueError(f"unknown file type {file_type!r}: one of {', '.join(FILE_TYPES)}")
    block = gguf.GGML_QUANT_SIZES[kind][0]
    return FALLBACK.get(kind, kind) if row % block else kind


def tensors(shape: Shape, file_type: str, layers: int) -> Iterator[TensorSpec]:
    """Every tensor of `shape` with `layers` layers (the shape's own count unless fewer are asked for)."""
    q_width, kv_width = shape.heads * shape.head_dim, shape.kv_heads * shape.head_dim
    # A tied model's embedding is its output layer, and llama.cpp's quantizer types it as one.
    yield TensorSpec(
        "token_embd.weight",
        (shape.vocab, shape.width),
        tensor_kind(file_type, "output" if shape.tied else "embd", 0, layers, shape.width),
    )
    yield TensorSpec("output_norm.weight", (shape.width,), Q.F32)
    if not shape.tied:
        yield TensorSpec(
            "output.weight", (shape.vocab, shape.width), tensor_kind(file_type, "output", 0, layers, shape.width)
        )
    matrices = (
        ("attn_q", "q", q_width, shape.width),
        ("attn_k", "k", kv_width, shape.width),
        ("attn_v", "v", kv_width, shape.width),
        ("attn_output", "o", shape.width, q_width),
        ("ffn_gate", "gate", shape.ffn, shape.width),
        ("ffn_up", "up", shape.ffn, shape.width),
        ("ffn_down", "down", shape.width, shape.ffn),
    )
    for layer in range(layers):
        block = f"blk.{layer}"
        yield TensorSpec(f"{block}.attn_norm.weight", (shape.width,), Q.F32)
        yield TensorSpec(f"{block}.ffn_norm.weight", (shape.width,), Q.F32)
        for name, role, rows, row in matrices:
            # The quantizer's layer rule counts the real model's layers, so a cut file keeps its mix.
            kind = tensor_kind(file_type, role, layer, shape.layers, row)
            yield TensorSpec(f"{block}.{name}.weight", (rows, row), kind)
        if shape.layout is not None:
            for name, array in shape.layout(shape.width, kv_width, shape.head_dim).items():
                yield TensorSpec(f"{block}.{name}", array.shape, Q.F32)


def _data(spec: TensorSpec, rng: np.random.Generator) -> np.ndarray:
    """Random quantized blocks with small scales (or, for norms and biases, ones and zeros)."""
    if spec.kind == Q.F32:
        fill = 0.0 if spec.name.endswith(".bias") else 1.0
        return np.full(spec.shape, fill, dtype=np.float32)
    rows, row = spec.shape
    if spec.kind in (Q.F16, Q.BF16):
        values = rng.uniform(-0.02, 0.02, size=(rows, row)).astype(np.float32)
        halves = values.astype(np.float16).view(np.uint16) if spec.kind == Q.F16 else values.view(np.uint32) >> 16
        return halves.astype(np.uint16).view(np.uint8).reshape(rows, -1)
    block, block_bytes = gguf.GGML_QUANT_SIZES[spec.kind]
    data = rng.integers(0, 256, size=(rows, row // block, block_bytes), dtype=np.uint8)
    scale = np.frombuffer(SCALE.tobytes(), dtype=np.uint8)
    for offset in SCALE_OFFSETS[spec.kind]:
        data[:, :, offset : offset + 2] = scale
    return data.reshape(rows, -1)


def _writer(path: Path, shape: Shape, file_type: str, layers: int, tokenizer: Path, diffusion: bool) -> gguf.GGUFWriter:
    writer = gguf.GGUFWriter(str(path), shape.arch)
    writer.add_name(f"{shape.label} random-weight stand-in")
    if file_type in FILE_TYPES:
        writer.add_file_type(FILE_TYPES[file_type])
    writer.add_context_length(4096)
    writer.add_embedding_length(shape.width)
    writer.add_block_count(layers)
    writer.add_feed_forward_length(shape.ffn)
    writer.add_head_count(shape.heads)
    writer.add_head_count_kv(shape.kv_heads)
    writer.add_key_length(shape.head_dim)
    writer.add_value_length(shape.head_dim)
    writer.add_rope_dimension_count(shape.head_dim)
    writer.add_rope_freq_base(shape.rope_base)
    writer.add_layer_norm_rms_eps(1e-6)
    writer.add_vocab_size(shape.vocab)
    copy_tokenizer(tokenizer, writer, shape.vocab)
    if diffusion:
        writer.add_bool(f"{shape.arch}.attention.causal", False)
        writer.add_mask_token_id(MASK_TOKEN_ID)
        writer.add_bool("diffusion.shift_logits", shape.shift)
    return writer


def write_shape(
    shape: Shape, file_type: str, folder: Path, tokenizer: Path, layers: int | None = None, seed: int = 0
) -> tuple[Path, Path]:
    """Write `shape` (cut to `layers` layers where given) at `file_type` into `folder`, as an AR file and a
    diffusion file with the same weights; returns (AR, diffusion). Files already there are kept."""
    layers = shape.layers if layers is None else layers
    stem = f"{shape.label.lower().replace(' ', '-')}-{file_type.lower()}-{layers}l"
    ar_path, diffusion_path = folder / f"{stem}-ar.gguf", folder / f"{stem}-diffusion.gguf"
    if ar_path.exists() and diffusion_path.exists():
        return ar_path, diffusion_path
    folder.mkdir(parents=True, exist_ok=True)
    specs = list(tensors(shape, file_type, layers))
    # Written under temporary names and renamed when whole: a file cut short is never taken for a finished one.
    forms = ((ar_path.with_suffix(".partial"), False), (diffusion_path.with_suffix(".partial"), True))
    writers = [_writer(path, shape, file_type, layers, tokenizer, diffusion) for path, diffusion in forms]
    for writer in writers:
        for spec in specs:
            if spec.kind == Q.F32:
                writer.add_tensor_info(spec.name, spec.shape, np.dtype(np.float32), 4 * int(np.prod(spec.shape)))
            else:
                byte_shape = gguf.quant_shape_to_byte_shape(spec.shape, spec.kind)
                writer.add_tensor_info(spec.name, byte_shape, np.dtype(np.uint8), int(np.prod(byte_shape)), spec.kind)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_ti_data_to_file()
    rng = np.random.default_rng(seed)
    for spec in specs:  # drawn once, written to both
        data = _data(spec, rng)
        for writer in writers:
            writer.write_tensor_data(data)
    for writer in writers:
        writer.close()
    for (partial, _), path in zip(forms, (ar_path, diffusion_path), strict=True):
        partial.replace(path)
    return ar_path, diffusion_path
