"""A fast reader for the metadata and tensor table of a GGUF file.

gguf's GGUFReader builds a numpy view for every element of every array, which takes about 2 s on a
100 MB model with a 49k-token vocabulary. Sharpen reads the header before every model load, so this
reader walks the same format (with the gguf package's type tables) and skips the contents of large
arrays, keeping only their length. It also checks that the tensor data the header promises is in the
file, which is how a truncated download is told apart from a corrupt one.
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, GGUFValueType

from models.errors import MissingModelFile, NotGGUFFile, TruncatedGGUFFile

GGUF_MAGIC = b"GGUF"
DEFAULT_ALIGNMENT = 32
# Arrays longer than this (vocabularies, merges, scores) are summarised by their length.
MAX_KEPT_ARRAY = 1024

_SCALAR_FORMATS: dict[GGUFValueType, str] = {
    GGUFValueType.UINT8: "<B",
    GGUFValueType.INT8: "<b",
    GGUFValueType.UINT16: "<H",
    GGUFValueType.INT16: "<h",
    GGUFValueType.UINT32: "<I",
    GGUFValueType.INT32: "<i",
    GGUFValueType.FLOAT32: "<f",
    GGUFValueType.BOOL: "<?",
    GGUFValueType.UINT64: "<Q",
    GGUFValueType.INT64: "<q",
    GGUFValueType.FLOAT64: "<d",
}


@dataclass(frozen=True)
class ArraySummary:
    """A large array whose elements were skipped."""

    element_type: str
    length: int


@dataclass(frozen=True)
class TensorEntry:
    name: str
    shape: tuple[int, ...]
    quantization: str
    offset: int
    n_bytes: int


@dataclass(frozen=True)
class GGUFHeader:
    path: Path
    version: int
    file_size: int
    metadata: dict[str, Any]
    tensors: list[TensorEntry] = field(repr=False)
    data_start: int
    # Where each metadata value sits in the file, (key, first byte of its type id, end), and the tensor
    # table's (start, end): what a rewrite of the metadata copies byte for byte.
    value_spans: list[tuple[str, int, int]] = field(default_factory=list, repr=False)
    table_span: tuple[int, int] = (0, 0)

    @property
    def data_end(self) -> int:
        return max((self.data_start + t.offset + t.n_bytes for t in self.tensors), default=self.data_start)


class _Cursor:
    def __init__(self, buffer: mmap.mmap | bytes, path: Path) -> None:
        self.buffer = buffer
        self.pos = 0
        self.path = path

    def _need(self, n: int) -> None:
        if self.pos + n > len(self.buffer):
            raise TruncatedGGUFFile(
                self.path,
                f"the file ends inside its header (at byte {len(self.buffer)})",
                "The download was probably cut short: download the file again.",
            )

    def unpack(self, fmt: str) -> Any:
        size = struct.calcsize(fmt)
        self._need(size)
        (value,) = struct.unpack_from(fmt, self.buffer, self.pos)
        self.pos += size
        return value

    def string(self) -> str:
        length = self.unpack("<Q")
        self._need(length)
        raw = bytes(self.buffer[self.pos : self.pos + length])
        self.pos += length
        return raw.decode("utf-8", errors="replace")

    def skip_string(self) -> None:
        length = self.unpack("<Q")
        self._need(length)
        self.pos += length


def _value_type(cursor: _Cursor) -> GGUFValueType:
    raw = cursor.unpack("<I")
    try:
        return GGUFValueType(raw)
    except ValueError:
        raise NotGGUFFile(cursor.path, f"unknown metadata value type {raw} at byte {cursor.pos - 4}") from None


def _read_value(cursor: _Cursor, value_type: GGUFValueType) -> Any:
    if value_type == GGUFValueType.STRING:
        return cursor.string()
    if value_type == GGUFValueType.ARRAY:
        element_type = _value_type(cursor)
        length = cursor.unpack("<Q")
        if length > MAX_KEPT_ARRAY:
            _skip_array(cursor, element_type, length)
            return ArraySummary(element_type.name, length)
        return [_read_value(cursor, element_type) for _ in range(length)]
    return cursor.unpack(_SCALAR_FORMATS[value_type])


def _skip_array(cursor: _Cursor, element_type: GGUFValueType, length: int) -> None:
    if element_type == GGUFValueType.STRING:
        for _ in range(length):
            cursor.skip_string()
    elif element_type == GGUFValueType.ARRAY:
        for _ in range(length):
            _read_value(cursor, GGUFValueType.ARRAY)
    else:
        size = struct.calcsize(_SCALAR_FORMATS[element_type]) * length
        cursor._need(size)
        cursor.pos += size


def _tensor_bytes(path: Path, name: str, shape: tuple[int, ...], type_id: int) -> tuple[str, int]:
    try:
        quant = GGMLQuantizationType(type_id)
    except ValueError:
        raise NotGGUFFile(path, f"tensor {name!r} has an unknown type id {type_id}") from None
    block_size, type_size = GGML_QUANT_SIZES[quant]
    n_elements = 1
    for dim in shape:
        n_elements *= dim
    return quant.name, n_elements // block_size * type_size


def read_gguf_header(path: Path | str) -> GGUFHeader:
    """Read a GGUF file's metadata and tensor table; raise a typed, user-readable error if it is not one."""
    path = Path(path)
    if not path.exists():
        raise MissingModelFile(
            path, "no such file", "Check the path, or run `sharpen models` to see what is installed."
        )
    if path.is_dir():
        raise NotGGUFFile(path, "is a folder, not a GGUF file")
    file_size = path.stat().st_size
    if file_size < 4:
        raise NotGGUFFile(path, f"is not a GGUF file (only {file_size} bytes)")
    with path.open("rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as buffer:
        if buffer[:4] != GGUF_MAGIC:
            raise NotGGUFFile(
                path,
                f"is not a GGUF file (it starts with {bytes(buffer[:4])!r}, not b'GGUF')",
                "Sharpen's llama.cpp engines need a .gguf model file.",
            )
        cursor = _Cursor(buffer, path)
        cursor.pos = 4
        version = cursor.unpack("<I")
        if version not in (2, 3):
            raise NotGGUFFile(path, f"has GGUF version {version}; only versions 2 and 3 (little-endian) are read")
        tensor_count = cursor.unpack("<Q")
        kv_count = cursor.unpack("<Q")
        metadata: dict[str, Any] = {}
        spans: list[tuple[str, int, int]] = []
        for _ in range(kv_count):
            key = cursor.string()
            value_start = cursor.pos
            metadata[key] = _read_value(cursor, _value_type(cursor))
            spans.append((key, value_start, cursor.pos))
        table_start = cursor.pos
        tensors: list[TensorEntry] = []
        for _ in range(tensor_count):
            name = cursor.string()
            n_dims = cursor.unpack("<I")
            shape = tuple(cursor.unpack("<Q") for _ in range(n_dims))
            type_id = cursor.unpack("<I")
            offset = cursor.unpack("<Q")
            quantization, n_bytes = _tensor_bytes(path, name, shape, type_id)
            tensors.append(TensorEntry(name, shape, quantization, offset, n_bytes))
        table = (table_start, cursor.pos)
        alignment = int(metadata.get("general.alignment", DEFAULT_ALIGNMENT))
        data_start = -(-cursor.pos // alignment) * alignment
    header = GGUFHeader(path, version, file_size, metadata, tensors, data_start, spans, table)
    if header.data_end > file_size:
        raise TruncatedGGUFFile(
            path,
            f"is truncated: its tensors need {header.data_end:,} bytes but the file has {file_size:,}",
            "The download was probably cut short: download the file again.",
        )
    return header
