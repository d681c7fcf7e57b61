"""What llama.cpp's CPU kernels cost, by weight type and model shape: the part of a model's costs that its file
decides, so that costs measured for one model (the embedded pair, by `sharpen calibrate`) can be carried to
another the user pulls (router/profile.py scaled_ar, scaled_diffusion).

Three figures per model, in Q8_0-weight equivalents. `decode`: a pass over one row (an AR token), every
weight read once, each type at its kernel's cost, plus each layer's operations' fixed costs (which is why a
135M model costs more per weight than a 1.5B one). `batch`: a batched pass's fixed part (a diffusion pass's:
the line through its costs at 4 to 64 rows, at no rows), which llama.cpp runs through other kernels than one
row's (on AMX, tiles of 16 rows), so that it is no fixed share of `decode` from model to model. `row`: each
further row of a batched pass (a diffusion block, a prompt), the kernels reusing the weights across rows, plus
each layer's work per row that follows its width (norms, attention against the context). Without AMX, from
8 rows on some k-quant types leave that line for ggml's tiled kernels, which add two figures (TiledCost).

The kernels weigh the types differently from one CPU class to another (on an AMX CPU a Q8_0 or Q4_K matrix
runs through tiles, a Q5_0 one does not; without AMX, Q5_0's rows cost about what Q8_0's do), so there is one
table per class, each fitted to the passes `bench/real_shapes.py` measured on a 2-core machine of that class
(docs/benchmarks.md). A profile records the table its works were counted with, and a model's costs are carried
by that same table.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import cache

from engines.cpu_info import cpu_info
from models.tensor_mix import TensorMix

# From TILED_FROM rows a pass runs some types' matrices through ggml's tiled kernels (ggml-cpu/tiled, on CPUs
# without AMX, for k-quant types the repacking kernels do not take: Q6_K, Q5_K, ...). Those unpack every weight
# once per window of up to TILE_WINDOW rows, then multiply the rows in tiles of TILE_ROWS, a part-filled tile
# costing a whole one: 8 rows cost what 16 do. Below TILED_FROM rows the same matrices run row by row.
TILED_FROM = 8
TILE_ROWS = 16
TILE_WINDOW = 256


@dataclass(frozen=True)
class TiledCost:
    """A type's cost through the tiled kernels: `unpack`, each window's fixed part per weight (as a batched
    pass's fixed part is counted), and `row`, each row of a tile (as each further row is)."""

    unpack: float
    row: float


@dataclass(frozen=True)
class KernelCost:
    decode: float
    row: float
    # A type whose batched kernels were never measured apart: its one-row cost.
    batch: float | None = None
    # From TILED_FROM rows these matrices run through the tiled kernels instead (`row` and `batch` then
    # describe the passes below it).
    tiled: TiledCost | None = None

    @property
    def batch_cost(self) -> float:
        return self.decode if self.batch is None else self.batch


@dataclass(frozen=True)
class ModelWork:
    """A model's work per pass, in Q8_0-equivalent weights: one row's, and each further row's; and `context`,
    what a row's attention to each position before it follows (layers x width); `batch`, a batched pass's fixed
    part."""

    decode: float
    row: float
    vocab: int
    context: float = 0.0
    batch: float = 0.0
    # The matrices that run through the tiled kernels from TILED_FROM rows: their share of `batch` and `row`
    # (what they cost below it), and what they cost from it on (TiledCost's unpack and row).
    tiled_batch: float = 0.0
    tiled_row: float = 0.0
    unpack: float = 0.0
    tile_row: float = 0.0

    @property
    def prompt_row(self) -> float:
        """Each row of a long batch (a prompt's tokens), its tiled matrices in whole tiles."""
        return self.row - self.tiled_row + self.tile_row


@dataclass(frozen=True)
class KernelTable:
    """One CPU class's kernel costs per type (`unknown`: a type not listed), and each layer's fixed costs in a
    one-row pass (its operations' set-up) and in a batched one (more operations, each over more rows), and its
    work per row per unit of width (norms, attention against the context)."""

    name: str  # as profiles record it
    label: str  # as a writer reads it
    costs: Mapping[str, KernelCost]
    unknown: KernelCost
    layer_decode: float
    layer_batch: float
    layer_row_per_width: float

    def cost(self, kind: str) -> KernelCost:
        return self.costs.get(kind, self.unknown)

    def work(self, mix: TensorMix) -> ModelWork:
        def total(figure: str) -> float:
            return sum(count * getattr(self.cost(kind), figure) for kind, count in mix.parameters)

        by_type = [(count, self.cost(kind)) for kind, count in mix.parameters]
        tiled = [(count, cost, cost.tiled) for count, cost in by_type if cost.tiled is not None]
        return ModelWork(
            decode=total("decode") + mix.layers * self.layer_decode,
            row=total("row") + mix.layers * mix.width * self.layer_row_per_width,
            vocab=mix.vocab,
            context=float(mix.layers * mix.width),
            batch=total("batch_cost") + mix.layers * self.layer_batch,
            tiled_batch=sum(count * cost.batch_cost for count, cost, _ in tiled),
            tiled_row=sum(count * cost.row for count, cost, _ in tiled),
            unpack=sum(count * tiles.unpack for count, _, tiles in tiled),
            tile_row=sum(count * tiles.row for count, _, tiles in tiled),
        )


# Intel Xeon with AMX_INT8. One row's and each further row's figures were first fitted to SmolLM2-135M (Q4_1),
# the embedded drafter (Q8_0), Qwen2.5-0.5B (Q4_K_M: mostly Q5_0, its rows of 896 being no whole k-quant
# blocks), Qwen2.5-1.5B (Q8_0 and Q4_K_M), Qwen3-1.7B (Q8_0) and LLaDA-8B at 2 and 6 layers (Q4_K_M). Q5_0's,
# Q4_K's and Q6_K's three figures and the per-layer constants were then fitted, from the embedded drafter's
# calibration, to four runs of `bench/real_shapes.py` (Qwen2.5-0.5B, Fast-dLLM v2 1.5B, SDAR-1.7B, LLaDA-8B;
# the 8B's one-row times ranged from 267 to 416 ms between them, and the figures sit between). Types none of
# them holds take the ratios of four-layer probes at width 2048 (`bench/real_shapes.py --kernels`), their
# batched passes' fixed part at one row's cost.
AMX = KernelTable(
    name="amx",
    label="CPUs with AMX",
    costs={
        "Q8_0": KernelCost(1.0, 1.0, 1.0),
        "Q4_0": KernelCost(0.96, 1.27),
        "Q4_1": KernelCost(0.55, 1.58),
        "Q5_0": KernelCost(1.99, 5.75, 2.19),
        "Q5_1": KernelCost(1.99, 5.75, 2.19),
        "Q4_K": KernelCost(1.0, 1.22, 1.79),
        "Q5_K": KernelCost(1.05, 1.9),
        "Q6_K": KernelCost(1.44, 2.84, 0.9),
        "F16": KernelCost(1.95, 3.09),
        "BF16": KernelCost(2.29, 2.5),
    },
    unknown=KernelCost(1.44, 2.84),  # about what Q6_K costs
    layer_decode=2.2e6,  # a 135M model's 30 layers cost as much in a one-row pass as 66M weights
    layer_batch=4.07e6,
    layer_row_per_width=10.5e3,
)
# AMD EPYC with AVX-512, the first fit: kept for the profiles that name it (calibrated with it), whose works it
# counted. It was fitted to runs that took a median of calibration rounds and one draft, and that counted the
# embedded AR model's work as SmolLM2's Q4_1 file rather than the Q8_0 base it runs on (Q4_1's one row).
AVX512_FIRST = KernelTable(
    name="avx512",
    label="CPUs without AMX",
    costs={
        "Q8_0": KernelCost(1.0, 1.0, 1.0),
        "Q4_0": KernelCost(0.59, 0.66),
        "Q4_1": KernelCost(1.28, 2.56),
        "Q5_0": KernelCost(1.15, 1.15, 1.52),
        "Q5_1": KernelCost(1.15, 1.15, 1.52),
        "Q4_K": KernelCost(0.75, 0.81, 0.82),
        "Q5_K": KernelCost(0.75, 0.37),
        "Q6_K": KernelCost(0.45, 0.53, 1.25),
        "F16": KernelCost(1.16, 1.15),
        "BF16": KernelCost(1.16, 0.63),
    },
    unknown=KernelCost(0.75, 0.81),  # about what Q4_K costs
    layer_decode=2.1e6,
    layer_batch=3.65e6,
    layer_row_per_width=5.8e3,
)
# AMD EPYC with AVX-512 (and AVX512_BF16), no AMX. Q5_0's, Q4_K's and Q6_K's figures and the per-layer constants
# fitted to two runs of `bench/real_shapes.py` there (AR the fastest of three runs, 8B cut at 2 and 10 layers),
# each estimated from three calibrations (the fastest rounds and draft); the other types take the ratios of its
# four-layer probes, their batched passes' fixed part at one row's cost. Kept for the profiles that name it.
AVX512_SECOND = KernelTable(
    name="avx512.2",
    label="CPUs without AMX",
    costs={
        "Q8_0": KernelCost(1.0, 1.0, 1.0),
        "Q4_0": KernelCost(0.59, 0.66),
        "Q4_1": KernelCost(0.84, 2.56),
        "Q5_0": KernelCost(1.27, 1.21, 1.61),
        "Q5_1": KernelCost(1.27, 1.21, 1.61),
        "Q4_K": KernelCost(0.55, 0.81, 0.8),
        "Q5_K": KernelCost(0.75, 0.37),
        "Q6_K": KernelCost(0.67, 0.85, 0.57),
        "F16": KernelCost(1.16, 1.15),
        "BF16": KernelCost(1.16, 0.63),
    },
    unknown=KernelCost(0.55, 0.81),  # about what Q4_K costs
    layer_decode=3.8e6,
    layer_batch=5.26e6,
    layer_row_per_width=5.8e3,
)
# The same, with Q6_K's and Q5_K's matrices through the tiled kernels from TILED_FROM rows (the types the embedded
# models hold keep their figures, so that a profile's works count alike by either). Q6_K's tile figures and Q4_K's
# row and batch (which the line through the tiles' step had bent) refitted to four runs of `bench/real_shapes.py`;
# Q6_K's line below TILED_FROM rows and Q5_K's figures from the four-layer probes (`--kernels`) at width 2048,
# Q5_K's tiles at the probes' ratio to Q6_K's (training/NOTES.md).
AVX512 = replace(
    AVX512_SECOND,
    name="avx512.3",
    costs={
        **AVX512_SECOND.costs,
        "Q4_K": KernelCost(0.55, 0.79, 0.45),
        "Q5_K": KernelCost(0.75, 2.2, 0.2, TiledCost(1.63, 0.51)),
        "Q6_K": KernelCost(0.67, 1.55, 0.37, TiledCost(3.75, 0.71)),
    },
)
# What ggml's AMX kernels need; a CPU without it runs the AVX-512 (or AVX2) kernels.
AMX_FLAG = "amx_int8"
# Profiles name the table their works were counted by: a table's figures, once shipped, change under a new name.
TABLES = {table.name: table for table in (AMX, AVX512_FIRST, AVX512_SECOND, AVX512)}
# The table a profile written before tables were per CPU class counted its works with.
FORMER_TABLE = AMX


def table_for(cpu_flags: frozenset[str]) -> KernelTable:
    return AMX if AMX_FLAG in cpu_flags else AVX512


@cache
def machine_table() -> KernelTable:
    """The table for this machine's CPU class."""
    return table_for(cpu_info().flags)


def named_table(name: str) -> KernelTable:
    """The table a profile names (a profile from before the tables were per class names none)."""
    return TABLES.get(name, FORMER_TABLE)
