"""The CPU read from /proc/cpuinfo, which the doctor and the router's kernel costs share."""

from __future__ import annotations

from pathlib import Path

from engines.cpu_info import cpu_info

TWO_PROCESSORS = (
    "processor\t: 0\nmodel name\t: AMD EPYC 9R14\nflags\t\t: fpu avx2 avx512f avx512_bf16\n\n"
    "processor\t: 1\nmodel name\t: AMD EPYC 9R14\nflags\t\t: fpu\n"
)


def test_the_first_processor_s_model_and_flags_are_read(tmp_path: Path) -> None:
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(TWO_PROCESSORS)
    cpu = cpu_info(cpuinfo)
    assert cpu.model == "AMD EPYC 9R14"
    assert cpu.flags == frozenset({"fpu", "avx2", "avx512f", "avx512_bf16"})
    assert cpu.features == frozenset({"AVX2", "AVX512", "AVX512_BF16"}), "under ggml's names"


def test_an_arm_cpu_s_features_line_is_its_flags(tmp_path: Path) -> None:
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nFeatures\t: fp asimd sve\n")
    assert cpu_info(cpuinfo).flags == frozenset({"fp", "asimd", "sve"})


def test_a_machine_without_proc_cpuinfo_has_no_flags(tmp_path: Path) -> None:
    assert cpu_info(tmp_path / "missing").flags == frozenset()
