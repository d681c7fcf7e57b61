"""Where each part of the model lives: all on one device, or the GPU first and the rest in CPU memory.

The plan is made before any weight is read, from the spec alone, so a model that cannot fit is refused
before a long load. A split plan is handed to accelerate's dispatch_model, which moves activations
between devices at module boundaries.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from engines.errors import EngineError
from models.transformer_spec import INT8_BYTES, NF4_BYTES, TransformerSpec

if TYPE_CHECKING:
    from engines.diffusion.load_settings import DiffusionLoadSettings

GIB = 1024**3
# What a GPU keeps back for activations, the KV context and CUDA's own allocations.
GPU_MARGIN_BYTES = int(1.0 * GIB)


class ModelDoesNotFit(EngineError):
    pass


@dataclass(frozen=True)
class Placement:
    """Module name -> device, for the top-level parts: embed, blocks.N, norm, output, rotary."""

    devices: dict[str, str]
    main: str

    @property
    def is_split(self) -> bool:
        return len(set(self.devices.values())) > 1

    def device_for(self, module_name: str) -> torch.device:
        parts = module_name.split(".")
        key = ".".join(parts[:2]) if parts[0] == "blocks" else parts[0]
        return torch.device(self.devices.get(key, self.main))

    def device_map(self) -> dict[str, str | int]:
        return {name: (int(d.split(":")[1]) if d.startswith("cuda:") else d) for name, d in self.devices.items()}

    def offloaded(self) -> list[str]:
        return [name for name, device in self.devices.items() if device == "cpu" and self.main != "cpu"]


def module_sizes(spec: TransformerSpec, dtype_bytes: int, quantization: str) -> list[tuple[str, int]]:
    """Bytes each top-level part takes once loaded, in the order the forward pass runs them."""
    kv_width = spec.kv_heads * spec.head_dim
    # Queries and the output projection are heads x head_dim wide, which Qwen3 (SDAR) lets differ from width.
    linear = 2 * spec.attention_width * spec.width + 2 * kv_width * spec.width + 3 * spec.ffn * spec.width
    per_weight = {"nf4": NF4_BYTES, "int8": INT8_BYTES}.get(quantization, float(dtype_bytes))
    small = 2 * spec.width + (spec.attention_width + 2 * kv_width) * spec.qkv_bias  # norms, biases
    block = int(linear * per_weight) + dtype_bytes * small
    sizes = [("embed", spec.vocab_size * spec.width * dtype_bytes)]
    sizes += [(f"blocks.{i}", block) for i in range(spec.layers)]
    sizes.append(("norm", spec.width * dtype_bytes))
    if not spec.tied_output:
        sizes.append(("output", spec.vocab_size * spec.width * dtype_bytes))
    return sizes


def split_by_budget(sizes: list[tuple[str, int]], budget: int, device: str) -> dict[str, str]:
    """Parts on `device` in order while they fit in `budget`; every later part in CPU memory."""
    devices: dict[str, str] = {}
    used = 0
    full = False
    for name, size in sizes:
        if not full and used + size <= budget:
            devices[name] = device
            used += size
        else:
            full = True
            devices[name] = "cpu"
    return devices


def gpu_budget(device: torch.device, settings: DiffusionLoadSettings) -> int:
    if settings.max_gpu_memory_gib > 0:
        return int(settings.max_gpu_memory_gib * GIB)
    free, _total = torch.cuda.mem_get_info(device)
    return max(0, free - GPU_MARGIN_BYTES)


def plan_placement(
    spec: TransformerSpec, device: torch.device, dtype: torch.dtype, settings: DiffusionLoadSettings
) -> Placement:
    main = str(device)
    sizes = module_sizes(spec, torch.empty((), dtype=dtype).element_size(), settings.quantization)
    if device.type == "cpu":
        return Placement({name: "cpu" for name, _ in sizes} | {"rotary": "cpu"}, main)
    return place_on_gpu(sizes, main, gpu_budget(device, settings), offload=settings.offload)


def place_on_gpu(sizes: list[tuple[str, int]], main: str, budget: int, *, offload: bool) -> Placement:
    needed = sum(size for _, size in sizes)
    devices = split_by_budget(sizes, budget, main)
    if "cpu" in devices.values() and not offload:
        raise ModelDoesNotFit(
            f"the weights need {needed / GIB:.1f} GiB and {main} has {budget / GIB:.1f} GiB for them; "
            'load it 4-bit (diffusion.quantization = "nf4"), or allow CPU offload (diffusion.offload = true)'
        )
    if devices.get("embed") == "cpu":
        raise ModelDoesNotFit(
            f"not even the embeddings fit in {budget / GIB:.1f} GiB of {main}; run it on the CPU "
            '(diffusion.device = "cpu") or choose a smaller model'
        )
    return Placement(devices | {"rotary": main}, main)
