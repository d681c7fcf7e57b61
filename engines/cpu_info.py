"""What this CPU is and which features it offers, read from /proc/cpuinfo without loading llama.cpp: the doctor
compares it with the build (engines/llama_build.py), and the router picks its kernel costs by it
(router/kernel_costs.py)."""

from __future__ import annotations

import platform
from dataclasses import dataclass
from pathlib import Path

# /proc/cpuinfo flag -> the name ggml's system info gives the same feature.
X86_FEATURES = {
    "avx": "AVX",
    "avx2": "AVX2",
    "fma": "FMA",
    "f16c": "F16C",
    "bmi2": "BMI2",
    "ssse3": "SSSE3",
    "avx_vnni": "AVX_VNNI",
    "avx512f": "AVX512",
    "avx512_vbmi": "AVX512_VBMI",
    "avx512vbmi": "AVX512_VBMI",
    "avx512_vnni": "AVX512_VNNI",
    "avx512_bf16": "AVX512_BF16",
    "amx_int8": "AMX_INT8",
}


@dataclass(frozen=True)
class CpuInfo:
    model: str
    machine: str  # platform.machine(): x86_64, aarch64, arm64
    system: str  # platform.system(): Linux, Darwin, Windows
    flags: frozenset[str]  # /proc/cpuinfo flags (empty where there is no /proc/cpuinfo)

    @property
    def features(self) -> frozenset[str]:
        """The CPU's features under ggml's names."""
        return frozenset(X86_FEATURES[flag] for flag in self.flags if flag in X86_FEATURES)


def cpu_info(cpuinfo: Path = Path("/proc/cpuinfo")) -> CpuInfo:
    """This CPU's model and flags (the first processor's; no flags where there is no /proc/cpuinfo)."""
    model, flags = platform.processor() or "", ""
    try:
        for line in cpuinfo.read_text(encoding="utf-8", errors="replace").splitlines():
            key, _, value = line.partition(":")
            key = key.strip()
            if key == "model name" and not model.startswith(value.strip()):
                model = value.strip()
            elif key in ("flags", "Features") and not flags:
                flags = value
    except OSError:
        pass
    return CpuInfo(model, platform.machine(), platform.system(), frozenset(flags.split()))
