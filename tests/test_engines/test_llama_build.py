"""The installed llama.cpp runs on this machine: no AMX kernels on x86-64 Linux, and a batched prompt evaluates."""

from __future__ import annotations

import platform

import pytest

from engines.events import Done, GenerationStats
from engines.llama_ar import LlamaAREngine
from engines.llama_build import NO_AMX_FLAGS, BuildInfo, CpuInfo, build_info, build_problems, parse_features

SYSTEM_INFO_WITH_AMX = (
    "CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | BMI2 = 1 | AVX512 = 1 | "
    "AVX512_VBMI = 1 | AVX512_VNNI = 1 | AVX512_BF16 = 1 | AMX_INT8 = 1 | LLAMAFILE = 1 | OPENMP = 1 | REPACK = 1 |"
)
XEON_FLAGS = frozenset(
    [
        "sse3",
        "ssse3",
        "avx",
        "avx2",
        "fma",
        "f16c",
        "bmi2",
        "avx512f",
        "avx512_vbmi",
        "avx512_vnni",
        "avx512_bf16",
        "amx_tile",
        "amx_int8",
    ]
)


def _build(system_info: str) -> BuildInfo:
    return BuildInfo("0.3.36", system_info, parse_features(system_info), gpu_offload=False)


@pytest.mark.skipif(
    not (platform.system() == "Linux" and platform.machine() == "x86_64"), reason="ggml's AMX kernels are x86-64 only"
)
def test_the_installed_build_has_no_amx_kernels() -> None:
    build = build_info()
    assert "AMX_INT8" not in build.features, (
        f"this llama.cpp was built with ggml's AMX kernels ({build.system_info}), which crash with SIGILL on "
        f"AMX CPUs: rebuild it with ./scripts/bootstrap, which passes {NO_AMX_FLAGS} in CFLAGS and CXXFLAGS"
    )


def test_the_installed_build_matches_this_cpu() -> None:
    from engines.llama_build import cpu_info

    fatal = [p.message for p in build_problems(build_info(), cpu_info()) if p.fatal]
    assert not fatal, f"{fatal}; rebuild llama-cpp-python for this machine with ./scripts/bootstrap"


def test_a_200_token_prompt_evaluates_in_one_batch(ar_engine: LlamaAREngine) -> None:
    """The AMX crash needed a batch: a one-token prompt passed where this one died."""
    text = " ".join(f"Item {i} of the meeting notes is settled." for i in range(40))
    assert len(ar_engine.tokenize(text)) >= 200
    ar_engine.forget_cache()
    events = list(ar_engine.complete(text, max_tokens=4))
    done = events[-1]
    assert isinstance(done, Done) and isinstance(done.stats, GenerationStats)
    assert done.stats.prompt_tokens >= 200 and done.stats.reused_tokens == 0
    assert done.stats.generated_tokens >= 1


def test_parse_features_reads_llama_cpp_system_info() -> None:
    features = parse_features(SYSTEM_INFO_WITH_AMX)
    assert {"AVX2", "AVX512", "AMX_INT8", "OPENMP"} <= features
    assert "SSE3" in features and "" not in features
    assert parse_features("CPU : AVX = 1 | AVX2 = 0 |") == {"AVX"}


def test_an_amx_build_on_x86_linux_is_fatal_and_names_the_flags() -> None:
    cpu = CpuInfo("Intel Xeon", "x86_64", "Linux", XEON_FLAGS)
    (problem,) = build_problems(_build(SYSTEM_INFO_WITH_AMX), cpu)
    assert problem.fatal and NO_AMX_FLAGS in problem.message and "AMX" in problem.message
    without_amx = SYSTEM_INFO_WITH_AMX.replace("AMX_INT8 = 1 | ", "")
    assert build_problems(_build(without_amx), cpu) == []


def test_a_build_for_another_cpu_is_fatal() -> None:
    avx2_only = CpuInfo(
        "an older CPU", "x86_64", "Linux", frozenset(["sse3", "ssse3", "avx", "avx2", "fma", "f16c", "bmi2"])
    )
    without_amx = SYSTEM_INFO_WITH_AMX.replace("AMX_INT8 = 1 | ", "")
    (problem,) = build_problems(_build(without_amx), avx2_only)
    assert problem.fatal and "AVX512" in problem.message and "AVX2," not in problem.message


def test_a_build_without_avx2_on_an_avx2_cpu_is_only_slow() -> None:
    cpu = CpuInfo("Intel Xeon", "x86_64", "Linux", XEON_FLAGS - {"amx_int8", "amx_tile"})
    (problem,) = build_problems(_build("CPU : SSE3 = 1 | SSSE3 = 1 | LLAMAFILE = 1 |"), cpu)
    assert not problem.fatal and "AVX2" in problem.message and "AVX512" in problem.message
