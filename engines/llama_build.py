"""What the installed llama.cpp was built to use, what this CPU offers, and where the two disagree."""

from __future__ import annotations

import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import llama_cpp

from engines.cpu_info import X86_FEATURES, CpuInfo

AMX_FEATURE = "AMX_INT8"
# What leaves ggml's AMX kernels out of a build that lacks scripts/llama-cpp-patches/amx-tile-config.patch.
NO_AMX_FLAGS = "-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
# A batch of 64 tokens through a quantized model: the AMX kernels' first tile instruction runs there.
_BATCH_PROBE = """
import sys
import llama_cpp
llama = llama_cpp.Llama(sys.argv[1], n_ctx=128, n_batch=64, n_threads=1, verbose=False)
llama.eval(list(range(100, 164)))
"""


@dataclass(frozen=True)
class BuildInfo:
    version: str
    system_info: str  # llama_print_system_info(), as llama.cpp prints it
    features: frozenset[str]  # the "NAME = 1" entries
    gpu_offload: bool


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


def batched_decode_crashes(model: Path, python: str = sys.executable, timeout_s: float = 120) -> bool:
    """Whether a batched decode of `model` (quantized weights) kills a fresh process with an illegal
    instruction: ggml's AMX kernels do on an AMX CPU when built without scripts/llama-cpp-patches."""
    try:
        result = subprocess.run([python, "-c", _BATCH_PROBE, str(model)], capture_output=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return False
    return result.returncode == -signal.SIGILL


def amx_in_use(build: BuildInfo, cpu: CpuInfo) -> bool:
    """Whether this build runs ggml's AMX kernels on this CPU (x86-64 Linux, AMX in both)."""
    x86_linux = cpu.machine in ("x86_64", "AMD64") and cpu.system == "Linux"
    return x86_linux and AMX_FEATURE in build.features and AMX_FEATURE in cpu.features


@dataclass(frozen=True)
class BuildProblem:
    fatal: bool  # the build crashes here (an illegal instruction), rather than runs slower
    message: str


def build_problems(build: BuildInfo, cpu: CpuInfo, amx_crashes: bool = False) -> list[BuildProblem]:
    """Where this llama.cpp build and this CPU disagree. `amx_crashes`: `batched_decode_crashes` said so."""
    problems: list[BuildProblem] = []
    if amx_crashes and amx_in_use(build, cpu):
        problems.append(
            BuildProblem(
                True,
                "llama.cpp's AMX kernels crash here: a batched decode died with an illegal instruction (SIGILL in "
                "ggml_backend_amx_mul_mat); rebuild it with the patches in scripts/llama-cpp-patches, or without "
                f"AMX ({NO_AMX_FLAGS} in CFLAGS and CXXFLAGS)",
            )
        )
    if cpu.flags:
        missing = sorted(
            feature for feature in build.features & set(X86_FEATURES.values()) if feature not in cpu.features
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
