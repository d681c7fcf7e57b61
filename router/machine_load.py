"""How busy the machine is around a calibration. Costs measured beside other work read high, and unevenly
(on 2 cores beside two other jobs: AR's token 8x its idle time, a diffusion pass 2.4x), which skews every
route; so a calibration watches the CPU before and while it measures, and one taken under load is marked and
measured again once the machine is idle.

Load is what other processes keep busy, from /proc/stat less this process's own time (engines/threads.py),
as a share of the cores: one busy process on 2 cores is half of them, on 16 cores an eighth.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from engines.threads import BusySnapshot, available_cores, busy_snapshot, others_between

# A measurement is under load where other processes kept at least this share of the cores busy, on average,
# before it or during it.
BUSY_SHARE = 0.25
# How long the machine is watched before a calibration (and before a re-measurement is started).
WATCH_S = 0.5
_STEP_S = 0.05


@dataclass(frozen=True)
class LoadWatch:
    """The CPU time used so far, to read the load since (None where /proc cannot say)."""

    started: BusySnapshot | None

    def others(self) -> float | None:
        """The cores other processes kept busy since the watch started, on average."""
        now = busy_snapshot()
        if self.started is None or now is None:
            return None
        return others_between(self.started, now)


def watch() -> LoadWatch:
    return LoadWatch(busy_snapshot())


def others_over(seconds: float = WATCH_S, stop: Callable[[], bool] = lambda: False) -> float | None:
    """The cores other processes keep busy over the next `seconds` (less, where `stop` says so early)."""
    watching = watch()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not stop():
        time.sleep(_STEP_S)
    return watching.others()


def under_load(others: float | None, cores: int | None = None) -> bool:
    """Whether `others` busy cores make a measurement on this machine's `cores` one taken under load."""
    cores = available_cores() if cores is None else cores
    return others is not None and others >= BUSY_SHARE * max(1, cores)
