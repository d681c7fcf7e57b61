"""`sharpen doctor` names the GPU llama.cpp found and says whether layers are offloaded to it."""

from __future__ import annotations

import json

import pytest

from app.cli import main
from app.doctor.gpu import ENABLE_OFFLOAD, NOT_GPU_BACKENDS, OFFLOAD_PROBE_MODEL, check_gpu, check_this_gpu
from engines.llama_build import build_info
from engines.llama_devices import Backend, Device, Offload, backends

CPU = Device("CPU", "Intel(R) Xeon(R) Processor", "CPU", "cpu", 24 * 2**30)
LAVAPIPE = Device("Vulkan0", "llvmpipe (LLVM 15.0.6, 256 bits)", "Vulkan", "gpu", 2 * 2**30)
RTX = Device("CUDA0", "NVIDIA GeForce RTX 4090", "CUDA", "gpu", 24 * 2**30)


def test_doctor_reports_this_build_s_devices_and_offload(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor", "--json"]) == 0
    findings = {f["check"]: f for f in json.loads(capsys.readouterr().out)["findings"]}
    gpu = findings["gpu"]
    # A GPU backend that found no device here (a Vulkan build without GGML_VK_VISIBLE_DEVICES on lavapipe) warns.
    idle = [b for b in backends() if b.name not in NOT_GPU_BACKENDS and b.devices == 0]
    assert gpu["status"] == ("warn" if idle and not build_info().gpu_offload else "ok")
    assert any(device["backend"] == "CPU" for device in gpu["facts"]["devices"])
    assert gpu["facts"]["ar.n_gpu_layers"] == -1
    # On the CPU build nothing is offloaded; on a GPU build (scripts/check-vulkan) every layer of the probe is.
    assert gpu["facts"]["offload_in_use"] == build_info().gpu_offload
    if build_info().gpu_offload:
        assert "offload in use" in gpu["detail"] and gpu["facts"]["offloaded_layers"] == gpu["facts"]["model_layers"]
    elif not idle:
        assert gpu["detail"].startswith("no GPU backend in this build")


def test_offload_off_is_said_and_nothing_is_loaded() -> None:
    finding = check_this_gpu(0)
    assert "offloaded_layers" not in finding.facts and not finding.facts["offload_in_use"]


def test_a_vulkan_device_with_every_layer_on_it() -> None:
    offload = Offload(13, 13, {"Vulkan0": 10.85, "CPU_Mapped": 1.06})
    finding = check_gpu([Backend("Vulkan", 1), Backend("CPU", 1)], [LAVAPIPE, CPU], -1, offload)
    assert finding.status == "ok" and finding.facts["offload_in_use"]
    assert finding.detail.startswith("Vulkan0 (llvmpipe (LLVM 15.0.6, 256 bits), 2.0 GiB)")
    assert f"offload in use: 13/13 layers of {OFFLOAD_PROBE_MODEL} on Vulkan0 (ar.n_gpu_layers = -1)" in finding.detail
    assert "Mesa's CPU driver" in finding.detail


def test_a_real_gpu_is_not_called_a_cpu_driver() -> None:
    finding = check_gpu([Backend("CUDA", 1), Backend("CPU", 1)], [RTX, CPU], 20, Offload(20, 29, {"CUDA0": 300.0}))
    assert finding.status == "ok" and "20/29 layers" in finding.detail and "CUDA0" in finding.detail
    assert "Mesa" not in finding.detail


def test_a_vulkan_build_without_a_device_says_how_to_get_one() -> None:
    finding = check_gpu([Backend("Vulkan", 0), Backend("CPU", 1)], [CPU], -1, None)
    assert finding.status == "warn" and "Vulkan backend, which found no device" in finding.detail
    assert "GGML_VK_VISIBLE_DEVICES=0" in finding.fix and "vulkaninfo" in finding.fix


def test_offload_set_off_or_refused() -> None:
    off = check_gpu([Backend("Vulkan", 1)], [LAVAPIPE, CPU], 0, None)
    assert off.status == "ok" and "offload off (ar.n_gpu_layers = 0)" in off.detail
    refused = check_gpu([Backend("Vulkan", 1)], [LAVAPIPE, CPU], -1, Offload(0, 13, {"CPU_Mapped": 11.0}))
    assert refused.status == "warn" and refused.fix == ENABLE_OFFLOAD and "put no layer" in refused.detail
