"""What a model's forward pass multiplies, read from its GGUF's tensor table: the parameters of its weight
matrices by type, its layers, width and vocabulary. The router's cost estimates weigh these
(router/kernel_costs.py).

An embedding that is only looked up (a separate output matrix exists) is left out: a token reads one row of
it. A tied embedding is the output layer, and counts.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from models.gguf_header import read_gguf_header
from models.gguf_info import info_from_header


@dataclass(frozen=True)
class TensorMix:
    """Matrix parameters by type ("Q8_0", "Q4_K", ...), and the model's layers, width and vocabulary."""

    parameters: tuple[tuple[str, int], ...]
    layers: int
    width: int
    vocab: int

    @property
    def total(self) -> int:
        return sum(count for _, count in self.parameters)


def mix_of(tensors: Iterable[tuple[str, tuple[int, ...], str]], layers: int, width: int, vocab: int) -> TensorMix:
    """The mix of `tensors` (name, shape, type name) in a model of `layers` layers, `width` and `vocab`."""
    listed = list(tensors)
    tied = not any(name == "output.weight" for name, _, _ in listed)
    counts: Counter[str] = Counter()
    for name, shape, kind in listed:
        if len(shape) < 2 or (name == "token_embd.weight" and not tied):
            continue
        elements = 1
        for dim in shape:
            elements *= dim
        counts[kind] += elements
    return TensorMix(tuple(sorted(counts.items())), layers, width, vocab)


def read_tensor_mix(path: Path) -> TensorMix:
    """The mix of a GGUF file (a ModelFileError if it is not one)."""
    header = read_gguf_header(path)
    info = info_from_header(header)
    tensors = ((t.name, t.shape, t.quantization) for t in header.tensors)
    return mix_of(tensors, info.n_layers or 0, info.n_embd or 0, info.vocab_size or 0)
