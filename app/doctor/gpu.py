"""Doctor's GPU check: the devices this llama.cpp build found (Vulkan, CUDA, Metal) and whether layers are
offloaded to them: llama.cpp's own count when it loads a small model with the configured ar.n_gpu_layers."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from app.doctor.report import Finding
from engines.llama_devices import Backend, Device, Offload, backends, devices, probe_offload
from models.catalogue import resolve_model

# A small file that loads in a moment, whatever models are set: the offload probe's model.
OFFLOAD_PROBE_MODEL = "sharpen-draft-mini"
# Backends that are no GPU, or whose devices the user adds (RPC servers): none of them "found no device".
NOT_GPU_BACKENDS = frozenset({"CPU", "BLAS", "RPC"})
ENABLE_OFFLOAD = "sharpen config set ar.n_gpu_layers -1"
VULKAN_DRIVER_FIX = (
    "install the GPU's Vulkan driver (`vulkaninfo --summary` lists the devices); Mesa's CPU driver (lavapipe) "
    "is used only with GGML_VK_VISIBLE_DEVICES=0 set"
)


def check_gpu(
    found_backends: Sequence[Backend], found_devices: Sequence[Device], n_gpu_layers: int, offload: Offload | None
) -> Finding:
    """`offload`: what loading the probe model showed (None where nothing was loaded: no device, or offload off)."""
    gpus = [device for device in found_devices if device.offloads]
    facts: dict[str, Any] = {
        "backends": [asdict(backend) for backend in found_backends],
        "devices": [asdict(device) for device in found_devices],
        "ar.n_gpu_layers": n_gpu_layers,
        "offload_in_use": bool(offload and offload.layers),
    }
    if offload is not None:
        facts.update(offloaded_layers=offload.layers, model_layers=offload.total, weights_mib=offload.buffers)
    if not gpus:
        idle = [b.name for b in found_backends if b.name not in NOT_GPU_BACKENDS and b.devices == 0]
        if not idle:
            return Finding(
                "gpu", "ok", "no GPU backend in this build (a CPU build): every layer runs on the CPU", "", facts
            )
        fix = VULKAN_DRIVER_FIX if "Vulkan" in idle else "install the GPU's driver"
        detail = (
            f"this build has the {', '.join(idle)} backend, which found no device here: every layer runs on the CPU"
        )
        return Finding("gpu", "warn", detail, fix, facts)
    found = "; ".join(device.label() for device in gpus)
    if n_gpu_layers == 0 or offload is None:
        return Finding(
            "gpu", "ok", f"{found}; offload off (ar.n_gpu_layers = 0): every layer runs on the CPU", "", facts
        )
    if not offload.layers:
        detail = f"{found}; llama.cpp put no layer of {OFFLOAD_PROBE_MODEL} on it (ar.n_gpu_layers = {n_gpu_layers})"
        return Finding("gpu", "warn", detail, ENABLE_OFFLOAD, facts)
    on = [name for name in offload.buffers if any(name == device.name for device in gpus)]
    where = ", ".join(on) or ", ".join(device.name for device in gpus)
    detail = (
        f"{found}; offload in use: {offload.layers}/{offload.total} layers of {OFFLOAD_PROBE_MODEL} on {where} "
        f"(ar.n_gpu_layers = {n_gpu_layers})"
    )
    if any(device.runs_on_the_cpu for device in gpus):
        detail += "; llvmpipe is Mesa's CPU driver: the GPU path runs, on the CPU, for checking rather than speed"
    return Finding("gpu", "ok", detail, "", facts)


def check_this_gpu(n_gpu_layers: int) -> Finding:
    found_backends, found_devices = backends(), devices()
    offload = None
    if n_gpu_layers != 0 and any(device.offloads for device in found_devices):
        offload = probe_offload(resolve_model(OFFLOAD_PROBE_MODEL).path, n_gpu_layers)
    return check_gpu(found_backends, found_devices, n_gpu_layers, offload)
