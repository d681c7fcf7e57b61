"""The devices the installed llama.cpp reports, and where it puts a model's layers (scripts/check-vulkan runs these
on the Vulkan build too)."""

from __future__ import annotations

from engines import llama_log
from engines.llama_build import build_info
from engines.llama_devices import backends, devices, probe_offload
from models.catalogue import resolve_model
from models.gguf_info import inspect_gguf


def test_the_devices_are_the_registry_s_and_offload_follows_them() -> None:
    found, registered = devices(), backends()
    assert any(device.backend == "CPU" and device.kind == "cpu" for device in found)
    assert {device.backend for device in found} <= {backend.name for backend in registered}
    for backend in registered:
        assert backend.devices == sum(device.backend == backend.name for device in found)
    # llama.cpp offloads exactly where it found a GPU.
    assert any(device.offloads for device in found) == build_info().gpu_offload
    assert all(device.name and device.description for device in found)


def test_the_offload_probe_reads_llama_cpp_s_own_count() -> None:
    model = resolve_model("sharpen-draft-mini").path
    offload = probe_offload(model, -1)
    assert offload.total == (inspect_gguf(model).n_layers or 0) + 1  # the output layer, as llama.cpp counts it
    assert offload.buffers and all(mib > 0 for mib in offload.buffers.values())
    gpus = {device.name for device in devices() if device.offloads}
    if gpus:
        assert offload.layers == offload.total and gpus & set(offload.buffers)
    else:
        assert offload.layers == 0 and all(name.startswith(("CPU", "AMX")) for name in offload.buffers)
    assert probe_offload(model, 0).layers == 0


def test_a_capture_holds_the_lines_logged_while_it_is_open() -> None:
    llama_log.install()
    with llama_log.capture() as lines:
        probe_offload(resolve_model("sharpen-draft-mini").path, 0)
    count = len(lines)
    assert any("model buffer size" in line for line in lines)
    probe_offload(resolve_model("sharpen-draft-mini").path, 0)
    assert len(lines) == count
