"""A diffusion GGUF's cacheable twin: the same tensors under the causal architecture that computes the
same graph, with `{arch}.attention.causal = false`.

llama.cpp builds its diffusion architectures (llada, dream, ...) without a KV cache, so every pass
re-decodes the whole sequence. It reads `{arch}.attention.causal` for every architecture, so the causal
twin made bidirectional computes the same graph and keeps a KV cache, which is what a prefix cache needs.
The cache holds keys and values at `diffusion.kv_type`: in f16 (llama.cpp's default; Sharpen's for models
of 1B parameters and more) a twin's logits differ from the native file's by about 3e-3 on tiny LLaDA and
Dream checkpoints, in f32 (Sharpen's for smaller models) by about 6e-6.
The twin is written byte for byte from the source: the metadata's architecture and its `{arch}.` keys
renamed, the tensor table and the tensor data copied unchanged.

llama.cpp's load-time kv_overrides cannot do this without a copy: an override is only consulted for keys
the file has, and the head counts are read through a path that looks the key up in the file first
(`get_key_or_arr`), so `llama.attention.head_count` cannot be supplied for a `llada` file.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import struct
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from gguf import GGUFValueType

from models.errors import ModelFileError
from models.file_lock import locked
from models.gguf_header import DEFAULT_ALIGNMENT, GGUF_MAGIC, GGUFHeader, read_gguf_header
from models.hub import sha256_of

# Diffusion architecture -> the causal llama.cpp architecture whose graph, made bidirectional, is the same
# (each checked by logits against the native file in tests/test_models/test_gguf_twin.py).
# llama.cpp's own sources say so: its dream graph is "copied from qwen2" and RND1 "is a Qwen3Moe AR model
# converted to diffusion model"; they differ from their twins only in building attention without a KV cache.
TWINS = {"llada": "llama", "dream": "qwen2", "rnd1": "qwen3moe"}
# Why the others have none, as llama.cpp's graphs stand in the version pinned.
NO_TWIN = {
    "llada-moe": (
        "llama.cpp has no causal architecture with LLaDA-MoE's graph (OLMoE, the nearest, normalises queries "
        "and keys over the whole width, LLaDA-MoE per head)"
    ),
}
CHUNK = 16 * 1024 * 1024
# Progress: bytes written, bytes in all.
TwinProgress = Callable[[int, int], None]


class TwinError(ModelFileError):
    """A twin that cannot be written (no disk space, an unreadable source)."""


@dataclass(frozen=True)
class TwinRecord:
    """What a twin was written from: a changed source is written again."""

    source: str
    size: int
    mtime_ns: int
    sha256: str
    architecture: str


def twin_architecture(architecture: str) -> str | None:
    return TWINS.get(architecture)


def why_no_twin(architecture: str) -> str:
    return NO_TWIN.get(architecture, f"llama.cpp has no causal architecture known to compute {architecture}'s graph")


def twin_path(source: Path, folder: Path) -> Path:
    """Named by the source's stem and where it is, so two files of one name keep two twins."""
    where = hashlib.sha1(str(source.resolve()).encode("utf-8")).hexdigest()[:10]
    return folder / f"{source.stem}-{where}.twin.gguf"


def _record_path(source: Path, folder: Path) -> Path:
    return twin_path(source, folder).with_suffix(".json")


def current_twin(source: Path, folder: Path, *, verify: bool = True) -> Path | None:
    """The twin of `source` if one was written from the file as it is now. A source whose time changed is
    hashed once (`verify`) and, if its bytes are the same, its record is brought up to date."""
    target, record_path = twin_path(source, folder), _record_path(source, folder)
    try:
        record = TwinRecord(**json.loads(record_path.read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError):
        return None
    if not target.is_file() or record.source != str(source.resolve()):
        return None
    stat = source.stat()
    if (stat.st_size, stat.st_mtime_ns) == (record.size, record.mtime_ns):
        return target
    if not verify or record.size != stat.st_size or sha256_of(source) != record.sha256:
        return None
    _save_record(
        record_path, TwinRecord(record.source, stat.st_size, stat.st_mtime_ns, record.sha256, record.architecture)
    )
    return target


def remove_twin(source: Path, folder: Path) -> int:
    """Delete the twin of `source` and its record; the bytes freed."""
    freed = 0
    for path in (twin_path(source, folder), _record_path(source, folder)):
        with contextlib.suppress(FileNotFoundError):
            freed += path.stat().st_size
            path.unlink()
    return freed


def write_twin(source: Path, folder: Path, progress: TwinProgress | None = None) -> Path:
    """Write (or reuse) the cacheable twin of the diffusion GGUF `source` in `folder`. One writer at a time
    per source (a lock file), so a pull and a first draft never write the same twin together."""
    folder.mkdir(parents=True, exist_ok=True)
    with locked(twin_path(source, folder).with_suffix(".lock")):
        existing = current_twin(source, folder)
        if existing is not None:
            return existing
        return _write(source, folder, progress)


def _write(source: Path, folder: Path, progress: TwinProgress | None) -> Path:
    header = read_gguf_header(source)
    architecture = str(header.metadata.get("general.architecture"))
    twin = twin_architecture(architecture)
    if twin is None:
        raise TwinError(source, why_no_twin(architecture))
    check_room(source, folder)
    before = source.stat()
    digest = hashlib.sha256()
    handle, partial_name = tempfile.mkstemp(dir=folder, suffix=".partial")
    partial = Path(partial_name)
    try:
        with source.open("rb") as reader, os.fdopen(handle, "wb") as writer:
            head = reader.read(header.data_start)
            digest.update(head)
            metadata, tensor_table = _rewritten_metadata(header, head, architecture, twin)
            writer.write(metadata + tensor_table)
            alignment = int(header.metadata.get("general.alignment", DEFAULT_ALIGNMENT))
            writer.write(b"\0" * (-writer.tell() % alignment))
            total, done = header.file_size - header.data_start, 0
            while chunk := reader.read(CHUNK):
                digest.update(chunk)
                writer.write(chunk)
                done += len(chunk)
                if progress is not None:
                    progress(done, total)
        after = source.stat()
        if (after.st_size, after.st_mtime_ns) != (before.st_size, before.st_mtime_ns):
            raise TwinError(source, "changed while its cacheable copy was being written", "Use it again to retry.")
        target = twin_path(source, folder)
        os.replace(partial, target)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    record = TwinRecord(str(source.resolve()), after.st_size, after.st_mtime_ns, digest.hexdigest(), architecture)
    _save_record(_record_path(source, folder), record)
    return target


def check_room(source: Path, folder: Path) -> None:
    """TwinError unless `folder` has room for a copy of `source`."""
    needed = source.stat().st_size + CHUNK
    probe = next(p for p in (folder, *folder.parents) if p.exists())
    free = shutil.disk_usage(probe).free
    if free < needed:
        raise TwinError(
            source,
            f"needs {needed / 1e9:.1f} GB free in {folder} for its cacheable copy, and {free / 1e9:.1f} GB are",
            "Free some space (or set SHARPEN_HOME elsewhere); until then it runs without a cache.",
        )


def _save_record(path: Path, record: TwinRecord) -> None:
    partial = path.with_suffix(".json.partial")
    partial.write_text(json.dumps(record.__dict__), encoding="utf-8")
    os.replace(partial, path)


def _string(text: str) -> bytes:
    raw = text.encode("utf-8")
    return struct.pack("<Q", len(raw)) + raw


def _rewritten_metadata(header: GGUFHeader, head: bytes, architecture: str, twin: str) -> tuple[bytes, bytes]:
    """The header's metadata with the architecture renamed and causal attention off, and the tensor table
    as it was (raw bytes: the tensors' offsets are relative to the data section, so they stay valid)."""
    entries: list[bytes] = []
    prefix, causal_key = f"{architecture}.", f"{twin}.attention.causal"
    for key, value_start, value_end in header.value_spans:
        value = head[value_start:value_end]
        if key == "general.architecture":
            value = struct.pack("<I", GGUFValueType.STRING) + _string(twin)
        renamed = twin + "." + key[len(prefix) :] if key.startswith(prefix) else key
        if renamed != causal_key:
            entries.append(_string(renamed) + value)
    entries.append(_string(causal_key) + struct.pack("<I?", GGUFValueType.BOOL, False))
    counts = GGUF_MAGIC + struct.pack("<IQQ", header.version, len(header.tensors), len(entries))
    table_start, table_end = header.table_span
    return counts + b"".join(entries), head[table_start:table_end]
