"""How many threads llama.cpp and torch run, so that other work on the CPU costs its share and no more.

llama.cpp's CPU kernels meet at a barrier after every graph node. With a thread per core and another
process on one of the cores, the kernel deschedules one of our threads and its partner waits at every
barrier (OpenMP spins first): measured on 2 cores with one busy process, a warm 16-token completion
took 2.9x its idle time and a diffusion pass 4x (bench/busy_machine.py). One thread fewer than the
cores other work leaves free has no partner to wait for. So, unless the user fixed a thread count, every
call asks `auto_threads()`: the cores this process may use, less the cores other processes kept busy
over the last second (sampled from /proc/stat in the background).

Passive waiting (OMP_WAIT_POLICY=PASSIVE) was measured too and not adopted: on an idle machine it made
the warm completion 3x slower (every barrier became a futex sleep and wake-up).

The second half is priority inside Sharpen: a completion (ghost text) marks itself in the foreground
while it runs; a draft waits between passes while one does, and runs a thread fewer while the user
is typing, so both engines never share two cores at full width.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

SAMPLE_INTERVAL_S = 0.25
SMOOTHING_S = 1.0  # time constant of the moving average of other processes' load
# Other work must keep this much of a core busy before a thread gives way to it.
YIELD_AT_CORES = 0.3
TYPING_WINDOW_S = 1.5  # a completion within this long ago means the user is typing
FOREGROUND_WAIT_S = 1.0  # longest a draft pass waits for completions, so typing never stalls a draft
TICKS_PER_S = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100  # /proc/stat's unit


def available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


@dataclass(frozen=True)
class BusySnapshot:
    at: float
    busy_ticks: int  # every process, all CPUs
    own_ticks: int  # this process


def busy_snapshot(stat: Path = Path("/proc/stat"), own: Path = Path("/proc/self/stat")) -> BusySnapshot | None:
    """The CPU time every process and this one have used so far (None where /proc cannot say)."""
    return _snapshot(stat, own)


def others_between(earlier: BusySnapshot, later: BusySnapshot) -> float:
    """The cores other processes kept busy, on average, from `earlier` to `later`."""
    elapsed = later.at - earlier.at
    if elapsed <= 0:
        return 0.0
    busy = (later.busy_ticks - earlier.busy_ticks) - (later.own_ticks - earlier.own_ticks)
    return max(0.0, busy / TICKS_PER_S / elapsed)


def _snapshot(stat: Path, own: Path) -> BusySnapshot | None:
    try:
        fields = stat.read_text().split("\n", 1)[0].split()[1:]
        user, nice, system, _idle, _iowait, irq, softirq, steal = (int(f) for f in fields[:8])
        # /proc/self/stat: the command may hold spaces; the fields after ')' are fixed.
        own_fields = own.read_text().rsplit(")", 1)[1].split()
        own_ticks = int(own_fields[11]) + int(own_fields[12])  # utime, stime
    except (OSError, ValueError, IndexError):
        return None
    return BusySnapshot(time.monotonic(), user + nice + system + irq + softirq + steal, own_ticks)


class CpuLoad:
    """Cores kept busy by other processes, a moving average sampled in a daemon thread."""

    def __init__(
        self, stat: Path = Path("/proc/stat"), own: Path = Path("/proc/self/stat"), *, background: bool = True
    ) -> None:
        self._stat, self._own = stat, own
        self._others = 0.0
        self._last = _snapshot(stat, own)
        self.supported = self._last is not None
        if self.supported and background:
            threading.Thread(target=self._run, name="sharpen-cpu-load", daemon=True).start()

    def others(self) -> float:
        """Cores other processes used, on average over about the last second (0.0 where unknown)."""
        return self._others

    def sample(self, *, smooth: bool = True) -> None:
        """Fold the load since the last sample in (smooth=False: replace the average by it)."""
        now = _snapshot(self._stat, self._own)
        if now is None or self._last is None or now.at <= self._last.at:
            return
        cores = others_between(self._last, now)
        weight = min(1.0, (now.at - self._last.at) / SMOOTHING_S) if smooth else 1.0
        self._others += weight * (cores - self._others)
        self._last = now

    def _run(self) -> None:
        while True:
            time.sleep(SAMPLE_INTERVAL_S)
            self.sample()


_load: CpuLoad | None = None
_load_lock = threading.Lock()


def cpu_load() -> CpuLoad:
    """The process's one sampler, started on first use (an engine starts it when it loads its model)."""
    global _load
    with _load_lock:
        if _load is None:
            _load = CpuLoad()
        return _load


def auto_threads(cores: int | None = None, others: float | None = None) -> int:
    """Every available core, less those other work keeps busy; at least one."""
    cores = available_cores() if cores is None else cores
    others = cpu_load().others() if others is None else others
    return max(1, cores - int(others + (1 - YIELD_AT_CORES)))


class Foreground:
    """Completions run in the foreground; drafts give way to them between passes."""

    def __init__(self) -> None:
        self._active = 0
        self._last_ended = float("-inf")
        self._changed = threading.Condition()

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        with self._changed:
            self._active += 1
        try:
            yield
        finally:
            with self._changed:
                self._active -= 1
                self._last_ended = time.monotonic()
                self._changed.notify_all()

    def busy(self) -> bool:
        """A completion is running, or ran a moment ago (the user is typing)."""
        with self._changed:
            return self._active > 0 or time.monotonic() - self._last_ended < TYPING_WINDOW_S

    def wait(self, timeout: float = FOREGROUND_WAIT_S) -> float:
        """Block while a completion runs (at most `timeout`); the seconds waited."""
        start = time.monotonic()
        with self._changed:
            self._changed.wait_for(lambda: self._active == 0, timeout)
        return time.monotonic() - start


def threads_for(configured: int, *, foreground_busy: bool = False) -> int:
    """The thread count for one call: the user's own setting, or auto_threads() (a thread fewer for
    background work while the user is typing: `foreground_busy`)."""
    if configured > 0:
        return configured
    threads = auto_threads()
    if foreground_busy:
        threads -= 1
    return max(1, threads)
