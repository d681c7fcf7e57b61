"""Describe the machine a benchmark ran on, so printed figures can be compared with care."""

from __future__ import annotations

import os
import platform
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def describe_machine() -> str:
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    try:
        memory_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError, AttributeError):
        memory_gib = float("nan")
    try:
        llama = version("llama-cpp-python")
    except PackageNotFoundError:
        llama = "not installed"
    return (
        f"{platform.node()} | {cpu_model()} | {cores} cores | {memory_gib:.0f} GiB | "
        f"Python {platform.python_version()} | llama-cpp-python {llama}"
    )
