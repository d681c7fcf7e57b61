"""Thread counts that give way to other work on the CPU, and completions that run before draft passes."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import llama_cpp
from scripted_backend import ScriptedBackend, fixed_script

from engines.diffusion.sampler import DiffusionSampler
from engines.diffusion.settings import DiffusionSettings
from engines.events import DiffusionStats, Done
from engines.llama_ar import LlamaAREngine, LlamaSettings
from engines.threads import TICKS_PER_S, CpuLoad, Foreground, auto_threads, available_cores, threads_for

PROMPT = [0, 1, 2]


def test_auto_threads_leaves_the_cores_other_work_keeps_busy() -> None:
    assert auto_threads(cores=2, others=0.0) == 2
    assert auto_threads(cores=2, others=0.25) == 2, "a browser tab's flicker costs no thread"
    assert auto_threads(cores=2, others=0.4) == 1
    assert auto_threads(cores=2, others=1.0) == 1
    assert auto_threads(cores=2, others=3.5) == 1, "always at least one"
    assert auto_threads(cores=8, others=2.0) == 6


def test_a_configured_thread_count_is_kept() -> None:
    assert threads_for(3) == 3
    assert 1 <= threads_for(0) <= available_cores()


def _write_stat(stat: Path, own: Path, busy: int, idle: int, mine: int) -> None:
    stat.write_text(f"cpu  {busy} 0 0 {idle} 0 0 0 0 0 0\ncpu0 0 0 0 0 0 0 0 0 0 0\n")
    # A command with a space and a parenthesis: the fields are counted after the last ')'.
    fields = ["S"] + ["0"] * 10 + [str(mine), "0"] + ["0"] * 20
    own.write_text(f"4242 (odd) name) {' '.join(fields)}\n")


def test_cpu_load_counts_only_other_processes(tmp_path: Path) -> None:
    stat, own = tmp_path / "stat", tmp_path / "self-stat"
    _write_stat(stat, own, busy=1000, idle=0, mine=100)
    load = CpuLoad(stat, own, background=False)
    assert load.supported and load.others() == 0.0
    time.sleep(0.2)
    started = time.monotonic()
    # Over the interval every process used 60 ticks, this one 40 of them: others used 20 ticks.
    _write_stat(stat, own, busy=1060, idle=0, mine=140)
    load.sample(smooth=False)
    elapsed = time.monotonic() - started + 0.2
    expected = 20 / TICKS_PER_S / elapsed
    assert abs(load.others() - expected) < expected * 0.3


def test_cpu_load_without_proc_is_unsupported_and_idle(tmp_path: Path) -> None:
    load = CpuLoad(tmp_path / "absent", tmp_path / "absent-too", background=False)
    assert not load.supported and load.others() == 0.0


def test_a_busy_process_is_seen_within_seconds() -> None:
    """The real /proc: a competing process spinning on one core shows as about one busy core."""
    spinner = subprocess.Popen([sys.executable, "-c", "import time\nt = time.time() + 8\nwhile time.time() < t: pass"])
    try:
        load = CpuLoad(background=False)
        seen = 0.0
        deadline = time.monotonic() + 6
        while time.monotonic() < deadline and seen < 0.6:
            time.sleep(0.25)
            load.sample()
            seen = load.others()
        assert seen >= 0.6, f"saw {seen:.2f} busy cores beside a spinning process"
        if available_cores() == 2:
            assert auto_threads(others=seen) == 1
    finally:
        spinner.kill()
        spinner.wait()


def test_foreground_holds_drafts_back_while_it_runs() -> None:
    gate = Foreground()
    assert gate.wait() < 0.05 and not gate.busy()
    release = threading.Event()

    def complete() -> None:
        with gate.running():
            release.wait(2)

    worker = threading.Thread(target=complete)
    worker.start()
    time.sleep(0.05)
    assert gate.busy()
    threading.Timer(0.3, release.set).start()
    waited = gate.wait(timeout=2)
    worker.join()
    assert 0.2 <= waited < 1.5
    assert gate.busy(), "right after a completion the user is still typing"
    assert gate.wait(timeout=0.5) < 0.05, "nothing runs: no wait"


def test_foreground_waits_are_bounded() -> None:
    gate = Foreground()
    with gate.running():
        started = time.monotonic()
        waited = gate.wait(timeout=0.2)
    assert 0.15 <= waited < 0.6 and time.monotonic() - started < 0.8


def test_a_draft_gives_way_between_passes_and_says_how_long() -> None:
    backend = ScriptedBackend(fixed_script([1] * 8, [0.9] * 8, len(PROMPT)))
    settings = DiffusionSettings.reference(steps=8, block_length=8)
    release = threading.Event()

    def completion() -> None:
        with backend.foreground.running():
            release.wait(2)

    holder = threading.Thread(target=completion)
    holder.start()
    time.sleep(0.05)
    threading.Timer(0.4, release.set).start()
    events = list(DiffusionSampler(backend).generate(PROMPT, 8, settings))
    holder.join()
    done = events[-1]
    assert isinstance(done, Done) and isinstance(done.stats, DiffusionStats)
    assert done.stats.passes == 8 and done.stats.waited_s >= 0.3
    assert done.stats.ms_per_pass * done.stats.passes / 1000 < done.stats.total_s - 0.3, "waiting is not a pass"


def test_the_ar_engine_sets_its_threads_per_call(embedded_model_path: Path) -> None:
    engine = LlamaAREngine(embedded_model_path, "smollm2", LlamaSettings(n_ctx=512, n_threads=0))
    context = engine._llama._ctx.ctx
    list(engine.complete("Dear Sam, thank you for", max_tokens=2))
    assert 1 <= llama_cpp.llama_n_threads(context) <= available_cores()
    for configured in (1, 3):
        engine.settings = LlamaSettings(n_ctx=512, n_threads=configured)
        list(engine.complete("Dear Sam, thank you for the", max_tokens=2))
        assert llama_cpp.llama_n_threads(context) == configured
