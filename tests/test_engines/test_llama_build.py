"""The installed llama.cpp runs on this machine: no AMX kernels on x86-64 Linux, and a batched prompt evaluates."""

from __future__ import annotations

import json
import platform
import subprocess
from importlib.metadata import distribution
from pathlib import Path

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


X86_LINUX = platform.system() == "Linux" and platform.machine() == "x86_64"
ROOT = Path(__file__).resolve().parents[2]


def _amx_macros(flags: str) -> list[str]:
    """The AMX macros GCC defines for an AMX CPU (-march=sapphirerapids) given `flags` too."""
    output = subprocess.run(
        ["cc", "-march=sapphirerapids", *flags.split(), "-dM", "-E", "-"],
        input="",
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [line for line in output.splitlines() if "__AMX_" in line]


@pytest.mark.skipif(not X86_LINUX, reason="ggml's AMX kernels are x86-64 only")
def test_the_build_flags_leave_out_amx_on_an_amx_cpu() -> None:
    """The machine running this may have no AMX, so the test asks the compiler what an AMX CPU gets."""
    printed = subprocess.run(
        [str(ROOT / "scripts" / "llama-cpp-wheel"), "--flags"], capture_output=True, text=True, check=True
    ).stdout
    flags = dict(line.split("=", 1) for line in printed.splitlines())
    assert NO_AMX_FLAGS in flags["CFLAGS"] and NO_AMX_FLAGS in flags["CXXFLAGS"]
    assert _amx_macros(""), "-march=sapphirerapids enables AMX (else this test proves nothing)"
    assert _amx_macros(flags["CXXFLAGS"]) == [], "the build flags must switch AMX off (scripts/llama-cpp-wheel)"


@pytest.mark.skipif(not X86_LINUX, reason="ggml's AMX kernels are x86-64 only")
def test_the_installed_wheel_was_built_without_amx() -> None:
    raw = distribution("llama_cpp_python").read_text("direct_url.json") or "{}"
    url = json.loads(raw).get("url", "")
    if not url.startswith("file://") or not url.endswith(".whl"):
        pytest.skip(f"llama-cpp-python was not installed by scripts/bootstrap ({url or 'from an index'})")
    recorded = Path(url.removeprefix("file://")).parent / "build-flags.txt"
    assert NO_AMX_FLAGS in recorded.read_text(), f"{recorded}: rebuild with ./scripts/bootstrap"


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
