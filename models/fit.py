"""Will a model fit this machine? RAM, GPU memory and disk, checked before a download and before a load.

Torch-free on purpose: GPU memory comes from `nvidia-smi` when it is there (a CUDA build of torch is not
needed to ask), so the check also runs in the base install.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from models.catalogue import CatalogueEntry
from models.errors import ModelError

GIB = 1024**3
DISK_MARGIN_BYTES = 256 * 1024**2


class DoesNotFit(ModelError):
    """The model needs more than this machine has; `--force` (pull, use) or models.check_fit = false overrides."""


@dataclass(frozen=True)
class Machine:
    ram_available: int
    ram_total: int
    gpu_free: int  # largest free GPU memory on one device; 0 without a GPU
    gpu_name: str

    def describe(self) -> str:
        gpu = f"{self.gpu_name} with {self.gpu_free / GIB:.1f} GiB free" if self.gpu_free else "no GPU"
        return f"{self.ram_available / GIB:.1f} GiB of RAM available (of {self.ram_total / GIB:.1f}), {gpu}"


def _meminfo() -> tuple[int, int]:
    try:
        fields = dict(line.split(":", 1) for line in Path("/proc/meminfo").read_text().splitlines() if ":" in line)
        return int(fields["MemAvailable"].split()[0]) * 1024, int(fields["MemTotal"].split()[0]) * 1024
    except (OSError, KeyError, ValueError):
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        return total, total


def _gpu() -> tuple[int, str]:
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return 0, ""
    try:
        output = subprocess.run(
            [smi, "--query-gpu=name,memory.free", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return 0, ""
    best = (0, "")
    for line in output.strip().splitlines():
        name, _, free = line.rpartition(",")
        try:
            best = max(best, (int(float(free)) * 1024**2, name.strip()))
        except ValueError:
            continue
    return best


def this_machine() -> Machine:
    available, total = _meminfo()
    gpu_free, gpu_name = _gpu()
    return Machine(available, total, gpu_free, gpu_name)


@dataclass(frozen=True)
class FitVerdict:
    fits: bool
    where: str  # "gpu" | "cpu" | "" when it fits nowhere
    reason: str


def check_fit(entry: CatalogueEntry, machine: Machine) -> FitVerdict:
    ram, vram = entry.needs_ram_gib * GIB, entry.needs_vram_gib * GIB
    if vram and machine.gpu_free >= vram:
        return FitVerdict(True, "gpu", f"fits the GPU ({entry.needs_vram_gib:.1f} GiB of {machine.describe()})")
    if machine.ram_available >= ram:
        return FitVerdict(True, "cpu", f"runs on the CPU ({entry.needs_ram_gib:.1f} GiB of {machine.describe()})")
    needs = f"{entry.needs_ram_gib:.1f} GiB of RAM" + (
        f" or {entry.needs_vram_gib:.1f} GiB of GPU memory" if entry.needs_vram_gib else ""
    )
    return FitVerdict(False, "", f"{entry.name} needs {needs}; this machine has {machine.describe()}")


def require_fit(entry: CatalogueEntry, machine: Machine, *, action: str, override: str) -> FitVerdict:
    verdict = check_fit(entry, machine)
    if not verdict.fits:
        raise DoesNotFit(f"refusing to {action}: {verdict.reason}. {override}")
    return verdict


def require_disk(name: str, needed_bytes: int, folder: Path, *, override: str) -> None:
    """Refuse a download of `needed_bytes` into `folder` that would leave less than a small margin free."""
    probe = folder
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    free = shutil.disk_usage(probe).free
    if needed_bytes and free < needed_bytes + DISK_MARGIN_BYTES:
        raise DoesNotFit(
            f"refusing to download {name}: it needs {_amount(needed_bytes)} and {probe} has "
            f"{_amount(free)} free. Free some space or set HF_HOME to a bigger disk. {override}"
        )


def _amount(size: int) -> str:
    return f"{size / GIB:.1f} GiB" if size >= GIB // 10 else f"{size / 1024**2:.0f} MiB"
