"""The devices the installed llama.cpp can run layers on (ggml's backend registry), and where a model's layers
went when llama.cpp loaded it (its own count, from its log)."""

from __future__ import annotations

import ctypes
import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Literal

import llama_cpp
from llama_cpp import llama_cpp as llama_lib

from engines import llama_log
from engines.llama_load import gpu_offload_available

DeviceKind = Literal["cpu", "gpu", "igpu", "accel", "meta"]
# enum ggml_backend_dev_type, in the order of the llama.cpp we pin.
_KINDS: tuple[DeviceKind, ...] = ("cpu", "gpu", "igpu", "accel", "meta")
# Mesa's Vulkan driver that runs on the CPU: offload works, for checking the GPU path rather than for speed.
CPU_VULKAN_DRIVERS = ("llvmpipe", "lavapipe")
_OFFLOADED = re.compile(r"offloaded (\d+)/(\d+) layers to GPU")
_BUFFER = re.compile(r"load_tensors:\s+(\S+) model buffer size =\s+([\d.]+) MiB")


@dataclass(frozen=True)
class Device:
    name: str  # ggml's: "CPU", "Vulkan0", "CUDA0"
    description: str  # the driver's: "llvmpipe (LLVM 15.0.6, 256 bits)", "NVIDIA GeForce RTX 4090"
    backend: str  # its registry: "CPU", "Vulkan", "CUDA", "Metal"
    kind: DeviceKind
    memory_total: int  # bytes; 0 where the backend does not say

    @property
    def offloads(self) -> bool:
        """Whether llama.cpp puts layers on it (`n_gpu_layers`)."""
        return self.kind in ("gpu", "igpu")

    @property
    def runs_on_the_cpu(self) -> bool:
        """A software driver (Mesa's lavapipe): a GPU to llama.cpp, the CPU underneath."""
        return any(driver in self.description.lower() for driver in CPU_VULKAN_DRIVERS)

    def label(self) -> str:
        memory = f", {self.memory_total / 2**30:.1f} GiB" if self.memory_total else ""
        return f"{self.name} ({self.description}{memory})"


@dataclass(frozen=True)
class Backend:
    name: str  # "CPU", "Vulkan", "CUDA", "Metal"
    devices: int  # the devices it found on this machine


@dataclass(frozen=True)
class Offload:
    """Where llama.cpp put a model's layers, as it says when it loads one."""

    layers: int  # on GPUs (0 on a build or a setting that offloads none)
    total: int  # the model's layers, its output layer counted as llama.cpp counts it
    buffers: dict[str, float] = field(default_factory=dict)  # MiB of weights per buffer ("Vulkan0", "CPU_Mapped")


@cache
def _ggml() -> ctypes.CDLL:
    """ggml, as llama-cpp-python loaded it (the same file, so the same registry)."""
    lib = llama_lib.load_shared_library("ggml", llama_lib._base_path)
    pointer, size, text = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p
    signatures: dict[str, tuple[list[type], type | None]] = {
        "ggml_backend_reg_count": ([], size),
        "ggml_backend_reg_get": ([size], pointer),
        "ggml_backend_reg_name": ([pointer], text),
        "ggml_backend_reg_dev_count": ([pointer], size),
        "ggml_backend_dev_count": ([], size),
        "ggml_backend_dev_get": ([size], pointer),
        "ggml_backend_dev_name": ([pointer], text),
        "ggml_backend_dev_description": ([pointer], text),
        "ggml_backend_dev_type": ([pointer], ctypes.c_int),
        "ggml_backend_dev_backend_reg": ([pointer], pointer),
        "ggml_backend_dev_memory": ([pointer, ctypes.POINTER(size), ctypes.POINTER(size)], None),
    }
    for name, (arguments, result) in signatures.items():
        function = getattr(lib, name)
        function.argtypes, function.restype = arguments, result
    return lib


def _text(value: bytes | None) -> str:
    return (value or b"").decode("utf-8", "replace")


def backends() -> tuple[Backend, ...]:
    """The backends this build has, each with the devices it found here."""
    gpu_offload_available()  # registers the backends a build loads dynamically
    lib = _ggml()
    found = []
    for index in range(lib.ggml_backend_reg_count()):
        reg = lib.ggml_backend_reg_get(index)
        found.append(Backend(_text(lib.ggml_backend_reg_name(reg)), int(lib.ggml_backend_reg_dev_count(reg))))
    return tuple(found)


def devices() -> tuple[Device, ...]:
    """Every device llama.cpp can use here, the CPU included."""
    gpu_offload_available()
    lib = _ggml()
    found = []
    for index in range(lib.ggml_backend_dev_count()):
        device = lib.ggml_backend_dev_get(index)
        free, total = ctypes.c_size_t(0), ctypes.c_size_t(0)
        lib.ggml_backend_dev_memory(device, ctypes.byref(free), ctypes.byref(total))
        kind = int(lib.ggml_backend_dev_type(device))
        found.append(
            Device(
                name=_text(lib.ggml_backend_dev_name(device)),
                description=_text(lib.ggml_backend_dev_description(device)).strip(),
                backend=_text(lib.ggml_backend_reg_name(lib.ggml_backend_dev_backend_reg(device))),
                kind=_KINDS[kind] if 0 <= kind < len(_KINDS) else "accel",
                memory_total=int(total.value),
            )
        )
    return tuple(found)


def probe_offload(model: Path, n_gpu_layers: int) -> Offload:
    """Load `model` as Sharpen does with `n_gpu_layers` (-1: all) and read where llama.cpp put its layers."""
    llama_log.install()
    with llama_log.capture() as lines:
        llama = llama_cpp.Llama(
            str(model),
            n_ctx=64,
            n_batch=32,
            n_gpu_layers=n_gpu_layers if gpu_offload_available() else 0,
            verbose=False,
        )
        total = int(llama_cpp.llama_model_n_layer(llama._model.model)) + 1
        llama.close()
    offload = Offload(0, total)
    for line in lines:
        if counted := _OFFLOADED.search(line):
            offload = Offload(int(counted[1]), int(counted[2]), offload.buffers)
        elif buffer := _BUFFER.search(line):
            offload.buffers[buffer[1]] = offload.buffers.get(buffer[1], 0.0) + float(buffer[2])
    return offload
