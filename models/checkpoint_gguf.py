"""A block-causal model's Hugging Face checkpoint (SDAR, Fast-dLLM v2) written as a GGUF llama.cpp runs.

llama.cpp has neither architecture, but their computation is Qwen3's (SDAR) and Qwen2's (Fast-dLLM v2)
under another attention mask. The file is written as `qwen3` / `qwen2` with causal attention off, the mask
token kept as a special token, the logit shift, and the block length the model was trained with
(BLOCK_CAUSAL_KEY), so Sharpen's llama.cpp backend decodes it block by block against the settled blocks'
keys and values: block-causal attention, exactly. Qwen's rotary layout (rotate_half) is what llama.cpp's
Qwen architectures compute, so no rows are permuted.

Torch-free: tensors are read from the safetensors files with numpy (bf16 widened to f32) one at a time and
written as they are converted, so a 7B model never sits in memory whole.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import gguf
import numpy as np

from models.decoding import AUTHORS_DECODING
from models.errors import UnsupportedModel
from models.gguf_info import BLOCK_CAUSAL_KEY, DECODING_SAMPLER_KEY, DECODING_THRESHOLD_KEY
from models.hf_checkpoint import CheckpointInfo, inspect_checkpoint
from models.layouts import gguf_name
from models.transformer_spec import expected_tensors

Quantization = Literal["F32", "F16", "Q8_0"]
QUANTIZATIONS: tuple[Quantization, ...] = ("F32", "F16", "Q8_0")
# llama.cpp's architecture for each block-causal checkpoint: the same tensors and computation.
GGUF_ARCHITECTURES = {"sdar": "qwen3", "fast_dllm_v2": "qwen2"}  # the keys of AUTHORS_DECODING
FILE_TYPES = {
    "F32": gguf.LlamaFileType.ALL_F32,
    "F16": gguf.LlamaFileType.MOSTLY_F16,
    "Q8_0": gguf.LlamaFileType.MOSTLY_Q8_0,
}
TYPES = {
    "F32": gguf.GGMLQuantizationType.F32,
    "F16": gguf.GGMLQuantizationType.F16,
    "Q8_0": gguf.GGMLQuantizationType.Q8_0,
}
Progress = Callable[[int, int], None]


def write_checkpoint_gguf(
    folder: Path, target: Path, quantization: Quantization = "Q8_0", progress: Progress | None = None
) -> Path:
    """Write `folder`'s weights and tokenizer to `target` (through a temporary file, renamed when whole)."""
    info = inspect_checkpoint(folder)
    spec = info.spec
    arch = GGUF_ARCHITECTURES.get(spec.architecture)
    if arch is None:
        raise UnsupportedModel(
            info.path,
            f"is a {spec.architecture} checkpoint, which Sharpen converts to GGUF only for block-causal models",
            "LLaDA and Dream have GGUFs of their own (sharpen models list); or serve the folder with torch.",
        )
    partial = target.with_suffix(".partial")
    try:
        _write(info, arch, partial, quantization, progress)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    partial.replace(target)
    return target


def _write(info: CheckpointInfo, arch: str, path: Path, quantization: Quantization, progress: Progress | None) -> None:
    spec = info.spec
    reader = _SafetensorsReader(info)
    writer = gguf.GGUFWriter(str(path), arch)
    _write_metadata(writer, info, arch, quantization)
    names = {ours: hf for ours, (hf, _) in expected_tensors(spec).items()}
    for ours, hf in names.items():
        kind = _tensor_type(ours, reader.shape(hf), quantization)
        shape = reader.shape(hf)
        byte_shape = gguf.quant_shape_to_byte_shape(shape, kind) if kind == TYPES["Q8_0"] else shape
        dtype = {TYPES["F32"]: np.float32, TYPES["F16"]: np.float16}.get(kind, np.uint8)
        nbytes = int(np.prod(byte_shape)) * np.dtype(dtype).itemsize
        writer.add_tensor_info(gguf_name(ours), byte_shape, np.dtype(dtype), nbytes, kind)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    for done, (ours, hf) in enumerate(names.items()):
        array = reader.read(hf)
        kind = _tensor_type(ours, array.shape, quantization)
        writer.write_tensor_data(_converted(array, kind))
        if progress:
            progress(done + 1, len(names))
    writer.close()


def _tensor_type(ours: str, shape: tuple[int, ...], quantization: Quantization) -> gguf.GGMLQuantizationType:
    """Norms and biases stay f32 (llama.cpp adds and multiplies them in f32); matrices take `quantization`,
    unless a row is not a whole number of Q8_0 blocks."""
    if len(shape) < 2:
        return TYPES["F32"]
    if quantization == "Q8_0" and shape[-1] % gguf.GGML_QUANT_SIZES[TYPES["Q8_0"]][0]:
        return TYPES["F16"]
    return TYPES[quantization]


def _converted(array: np.ndarray, kind: gguf.GGMLQuantizationType) -> np.ndarray:
    if kind == TYPES["F32"]:
        return array.astype(np.float32)
    if kind == TYPES["F16"]:
        return array.astype(np.float16)
    return gguf.quantize(array.astype(np.float32), kind)


def _write_metadata(writer: gguf.GGUFWriter, info: CheckpointInfo, arch: str, quantization: Quantization) -> None:
    spec = info.spec
    writer.add_name(info.path.name)
    writer.add_file_type(FILE_TYPES[quantization])
    writer.add_context_length(spec.context_length)
    writer.add_embedding_length(spec.width)
    writer.add_block_count(spec.layers)
    writer.add_feed_forward_length(spec.ffn)
    writer.add_head_count(spec.heads)
    writer.add_head_count_kv(spec.kv_heads)
    writer.add_key_length(spec.head_dim)
    writer.add_value_length(spec.head_dim)
    writer.add_rope_freq_base(spec.rope_theta)
    writer.add_layer_norm_rms_eps(spec.norm_eps)
    writer.add_bool(f"{arch}.attention.causal", False)
    writer.add_bool("diffusion.shift_logits", spec.shift_logits)
    writer.add_uint32(BLOCK_CAUSAL_KEY, spec.block_causal_length)
    sampler, threshold = AUTHORS_DECODING[spec.architecture]
    writer.add_string(DECODING_SAMPLER_KEY, sampler)
    writer.add_float32(DECODING_THRESHOLD_KEY, threshold)
    tokenizer = checkpoint_tokenizer(info.path, spec.vocab_size)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("qwen2")  # both models speak Qwen's tokenizer
    writer.add_token_list(tokenizer.tokens)
    writer.add_token_types(tokenizer.types)
    writer.add_token_merges(tokenizer.merges)
    writer.add_mask_token_id(spec.mask_token_id)
    if spec.eos_token_ids:
        writer.add_eos_token_id(spec.eos_token_ids[0])
    writer.add_add_bos_token(False)
    if tokenizer.chat_template:
        writer.add_chat_template(tokenizer.chat_template)


class CheckpointTokenizer:
    """A byte-level BPE tokenizer.json as GGUF stores it: every id's text and type, and the merges."""

    def __init__(self, tokens: list[str], types: list[int], merges: list[str], chat_template: str) -> None:
        self.tokens, self.types, self.merges, self.chat_template = tokens, types, merges, chat_template


def checkpoint_tokenizer(folder: Path, vocab_size: int) -> CheckpointTokenizer:
    """tokenizer.json's vocabulary and added tokens by id (special ones as control tokens, as llama.cpp's
    converter marks them), ids with no token padded up to the model's vocabulary, and the chat template."""
    raw = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
    model = raw["model"]
    if model.get("type") != "BPE":
        raise UnsupportedModel(folder, "has a tokenizer that is not byte-level BPE", "Sharpen converts Qwen's.")
    by_id: dict[int, tuple[str, int]] = {index: (text, gguf.TokenType.NORMAL) for text, index in model["vocab"].items()}
    for added in raw.get("added_tokens", []):
        kind = gguf.TokenType.CONTROL if added.get("special") else gguf.TokenType.USER_DEFINED
        by_id[int(added["id"])] = (added["content"], kind)
    size = max(vocab_size, max(by_id) + 1)
    tokens = [by_id.get(i, (f"[PAD{i}]", gguf.TokenType.UNUSED))[0] for i in range(size)]
    types = [int(by_id.get(i, ("", gguf.TokenType.UNUSED))[1]) for i in range(size)]
    merges = [merge if isinstance(merge, str) else " ".join(merge) for merge in model.get("merges", [])]
    return CheckpointTokenizer(tokens, types, merges, _chat_template(folder))


def _chat_template(folder: Path) -> str:
    try:
        config: dict[str, Any] = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return ""
    template = config.get("chat_template")
    return template if isinstance(template, str) else ""


class _SafetensorsReader:
    """Tensors by name from a checkpoint's safetensors files, as float32 numpy arrays (memory-mapped)."""

    WIDENED = {"F32": np.float32, "F16": np.float16, "BF16": np.uint16}

    def __init__(self, info: CheckpointInfo) -> None:
        self.info = info
        self._headers: dict[str, tuple[int, dict[str, Any]]] = {}

    def shape(self, name: str) -> tuple[int, ...]:
        return self.info.tensors[name].shape

    def read(self, name: str) -> np.ndarray:
        entry = self.info.tensors[name]
        start, header = self._header(entry.file)
        lo, hi = header[name]["data_offsets"]
        data = np.memmap(self.info.path / entry.file, dtype=np.uint8, mode="r", offset=start + lo, shape=(hi - lo,))
        array = data.view(self.WIDENED[entry.dtype]).reshape(entry.shape)
        if entry.dtype == "BF16":  # bf16 is f32's upper half
            return (array.astype(np.uint32) << 16).view(np.float32)
        return array.astype(np.float32)

    def _header(self, file: str) -> tuple[int, dict[str, Any]]:
        if file not in self._headers:
            with open(self.info.path / file, "rb") as handle:
                (length,) = struct.unpack("<Q", handle.read(8))
                self._headers[file] = (8 + length, json.loads(handle.read(length)))
        return self._headers[file]
