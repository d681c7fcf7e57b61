"""What the installed llama.cpp was built to use, what this CPU offers, and where the two disagree."""

from __future__ import annotations

import platform
from dataclasses import dataclass
from pathlib import Path

import llama_cpp

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
AMX_FEATURE = "AMX_INT8"
NO_AMX_FLAGS = "-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"


@dataclass(frozen=True)
class BuildInfo:
    version: str
    system_info: str  # llama_print_system_info(), as llama.cpp prints it
    features: frozenset[str]  # the "NAME = 1" entries
    gpu_offload: bool


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


def parse_features(system_info: str) -> frozenset[str]:
    """ "CPU : SSE3 = 1 | AVX2 = 1 | AMX_INT8 = 1 | ..." -> {"SSE3", "AVX2", "AMX_INT8"}."""
    features: set[str] = set()
    for part in system_info.replace(":", "|").split("|"):
        name, sep, value = part.partition("=")
        if sep and value.strip() not in ("", "0"):
            features.add(name.strip())
    return frozenset(features)


def build_info() -> BuildInfo:
    info = llama_cpp.llama_print_system_info().decode("utf-8", "replace").strip()
    return BuildInfo(
        version=llama_cpp.__version__,
        system_info=info,
        features=parse_features(info),
        gpu_offload=bool(llama_cpp.llama_supports_gpu_offload()),
    )


def cpu_info(cpuinfo: Path = Path("/proc/cpuinfo")) -> CpuInfo:
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


@dataclass(frozen=True)
class BuildProblem:
    fatal: bool  # the build crashes here (an illegal instruction), rather than runs slower
    message: str


def build_problems(build: BuildInfo, cpu: CpuInfo) -> list[BuildProblem]:
    """Where this llama.cpp build and this CPU disagree."""
    problems: list[BuildProblem] = []
    x86_linux = cpu.machine in ("x86_64", "AMD64") and cpu.system == "Linux"
    if x86_linux and AMX_FEATURE in build.features:
        problems.append(
            BuildProblem(
                True,
                "llama.cpp was built with ggml's AMX kernels, which crash with an illegal instruction "
                f"(SIGILL in ggml_backend_amx_mul_mat) on x86-64 Linux; rebuild it with {NO_AMX_FLAGS} "
                "in CFLAGS and CXXFLAGS",
            )
        )
    if cpu.flags:
        missing = sorted(
            feature
            for feature in build.features & set(X86_FEATURES.values()) - {AMX_FEATURE}
            if feature not in cpu.features
        )
        if missing:
            problems.append(
                BuildProblem(
                    True,
                    f"llama.cpp was built for another CPU: it uses {', '.join(missing)}, which this CPU lacks, "
                    "and dies with an illegal instruction",
                )
            )
        unused = sorted(f for f in ("AVX2", "AVX512") if f in cpu.features and f not in build.features)
        if unused and not missing:
            problems.append(
                BuildProblem(False, f"llama.cpp was built without {', '.join(unused)}, which this CPU has: slower")
            )
    return problems
