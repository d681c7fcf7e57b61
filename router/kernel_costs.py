"""What llama.cpp's CPU kernels cost, by weight type and model shape: the part of a model's costs that its file
decides, so that costs measured for one model (the embedded pair, by `sharpen calibrate`) can be carried to
another the user pulls (router/profile.py scaled_ar, scaled_diffusion).

Three figures per model, in Q8_0-weight equivalents. `decode`: a pass over one row (an AR token), every
weight read once, each type at its kernel's cost, plus each layer's operations' fixed costs (which is why a
135M model costs more per weight than a 1.5B one). `batch`: a batched pass's fixed part (a diffusion pass's:
the line through its costs at 4 to 64 rows, at no rows), which llama.cpp runs through other kernels than one
row's (on AMX, tiles of 16 rows), so that it is no fixed share of `decode` from model to model: a smaller share
at Qwen2.5-1.5B (Q8_0) than at the embedded 135M drafter, a larger one at LLaDA-8B (Q4_K). `row`: each further
row of a batched pass (a diffusion block, a prompt), the kernels reusing the weights across rows, plus each
layer's work per row that follows its width (norms, attention against the context). The figures were fitted to the
passes measured at real shapes on an Intel Xeon with AMX_INT8, 2 cores (bench/real_shapes.py,
docs/benchmarks.md); another CPU's kernels weigh the types differently, which its calibration scales only
as a whole.
"""

from __future__ import annotations

from dataclasses import dataclass

from models.tensor_mix import TensorMix


@dataclass(frozen=True)
class KernelCost:
    decode: float
    row: float
    # A type whose batched kernels were never measured apart: its one-row cost.
    batch: float | None = None

    @property
    def batch_cost(self) -> float:
        return self.decode if self.batch is None else self.batch


# One row's and each further row's figures were first fitted to SmolLM2-135M (Q4_1), the embedded drafter (Q8_0),
# Qwen2.5-0.5B (Q4_K_M: mostly Q5_0, its rows of 896 being no whole k-quant blocks), Qwen2.5-1.5B (Q8_0 and
# Q4_K_M), Qwen3-1.7B (Q8_0) and LLaDA-8B at 2 and 6 layers (Q4_K_M). Q5_0's, Q4_K's and Q6_K's three figures
# and the per-layer constants below were then fitted, from the embedded drafter's calibration, to four runs of
# `bench/real_shapes.py` (Qwen2.5-0.5B, Fast-dLLM v2 1.5B, SDAR-1.7B, LLaDA-8B; the 8B's one-row times ranged
# from 267 to 416 ms between them, and the figures sit between). Types none of them holds take the ratios of
# four-layer probes at width 2048 (`bench/real_shapes.py --kernels`), their batched passes' fixed part at one
# row's cost.
KERNEL_COSTS: dict[str, KernelCost] = {
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
}
# A type not in the table: about what Q6_K costs.
UNKNOWN = KernelCost(1.44, 2.84)
# Each layer's fixed costs in a one-row pass (its operations' set-up: a 135M model's 30 layers cost as much as
# 66M weights) and in a batched one (more operations, and each over more rows), and its work per row per unit of
# width (norms, attention against the context).
LAYER_DECODE = 2.2e6
LAYER_BATCH = 4.07e6
LAYER_ROW_PER_WIDTH = 10.5e3


def kernel_cost(kind: str) -> KernelCost:
    return KERNEL_COSTS.get(kind, UNKNOWN)


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


def work_of(mix: TensorMix) -> ModelWork:
    return ModelWork(
        decode=sum(count * kernel_cost(kind).decode for kind, count in mix.parameters) + mix.layers * LAYER_DECODE,
        row=sum(count * kernel_cost(kind).row for kind, count in mix.parameters)
        + mix.layers * mix.width * LAYER_ROW_PER_WIDTH,
        vocab=mix.vocab,
        context=float(mix.layers * mix.width),
        batch=sum(count * kernel_cost(kind).batch_cost for kind, count in mix.parameters) + mix.layers * LAYER_BATCH,
    )
