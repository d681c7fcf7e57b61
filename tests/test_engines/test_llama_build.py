"""The installed llama.cpp runs on this machine: AMX kernels where the CPU has AMX, and a batched prompt evaluates."""

from __future__ import annotations

import json
import platform
import stat
from importlib.metadata import distribution
from pathlib import Path

import pytest

from engines.cpu_info import CpuInfo, cpu_info
from engines.events import Done, GenerationStats
from engines.llama_ar import LlamaAREngine
from engines.llama_build import (
    NO_AMX_FLAGS,
    BuildInfo,
    batched_decode_crashes,
    build_info,
    build_problems,
    parse_features,
)
from models.catalogue import resolve_model

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


X86_LINUX = platform.system() == "Linux" and platform.machine() == "x86_64"
AMX_CPU = X86_LINUX and "amx_int8" in cpu_info().flags


def _installed_by_bootstrap() -> bool:
    raw = distribution("llama_cpp_python").read_text("direct_url.json") or "{}"
    url = json.loads(raw).get("url", "")
    return url.startswith("file://") and url.endswith(".whl")


@pytest.mark.skipif(not AMX_CPU, reason="this CPU has no AMX")
def test_an_amx_cpu_gets_the_amx_kernels() -> None:
    """scripts/llama-cpp-wheel builds natively, with the patch that lets the AMX kernels run."""
    if not _installed_by_bootstrap():
        pytest.skip("llama-cpp-python was not installed by scripts/bootstrap")
    assert "AMX_INT8" in build_info().features, build_info().system_info


def test_a_batched_decode_runs_in_a_fresh_process() -> None:
    """A batch of 64 tokens through the quantized embedded model: on an AMX CPU the AMX kernels' tile
    instructions run there, and a build without scripts/llama-cpp-patches/amx-tile-config.patch dies."""
    assert not batched_decode_crashes(resolve_model("smollm2-135m-instruct").path)


def test_a_process_killed_by_an_illegal_instruction_is_a_crash(tmp_path: Path) -> None:
    """The probe reads the signal the process died of: a stand-in interpreter that raises SIGILL is a crash,
    one that fails otherwise is not."""
    dying, failing = tmp_path / "dying", tmp_path / "failing"
    dying.write_text("#!/bin/sh\nkill -ILL $$\n")
    failing.write_text("#!/bin/sh\nexit 1\n")
    for script in (dying, failing):
        script.chmod(script.stat().st_mode | stat.S_IXUSR)
    model = resolve_model("smollm2-135m-instruct").path
    assert batched_decode_crashes(model, python=str(dying))
    assert not batched_decode_crashes(model, python=str(failing))


def test_the_installed_build_matches_this_cpu() -> None:
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


def test_an_amx_build_is_fatal_only_where_its_kernels_crash() -> None:
    cpu = CpuInfo("Intel Xeon", "x86_64", "Linux", XEON_FLAGS)
    assert build_problems(_build(SYSTEM_INFO_WITH_AMX), cpu) == []
    (problem,) = build_problems(_build(SYSTEM_INFO_WITH_AMX), cpu, amx_crashes=True)
    assert problem.fatal and NO_AMX_FLAGS in problem.message and "scripts/llama-cpp-patches" in problem.message


def test_an_amx_build_on_a_cpu_without_amx_is_built_for_another_cpu() -> None:
    without_amx = CpuInfo("Intel Xeon", "x86_64", "Linux", XEON_FLAGS - {"amx_int8", "amx_tile"})
    (problem,) = build_problems(_build(SYSTEM_INFO_WITH_AMX), without_amx, amx_crashes=True)
    assert problem.fatal and "another CPU" in problem.message and "AMX_INT8" in problem.message


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
