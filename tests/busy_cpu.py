"""Real competing work for the tests of a busy machine: processes that spin on the CPU, each bounded in time
and stopped when the test is done with them."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from collections.abc import Iterator

# Longest a spinning process runs if the test never stops it (a crash, a debugger).
SPIN_LIMIT_S = 60.0


@contextlib.contextmanager
def busy_processes(count: int) -> Iterator[None]:
    """`count` processes spinning on the CPU while the block runs (2 on 2 cores keeps every core busy)."""
    code = f"import time\nend = time.monotonic() + {SPIN_LIMIT_S}\nwhile time.monotonic() < end: pass"
    spinners = [subprocess.Popen([sys.executable, "-c", code]) for _ in range(count)]
    try:
        time.sleep(0.3)  # started and spinning
        yield
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()
