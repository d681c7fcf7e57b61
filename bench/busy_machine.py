"""Sharpen on a busy machine: autocomplete and diffusion passes idle and beside competing busy processes.

For each condition (idle, then 1 and 2 busy processes that this bench starts and stops, each a bounded
spin loop) it runs every configuration in a fresh process, alternating, so the same noise hits each:

- `old`: the defaults before the busy-machine work: a thread per core, libgomp's own waiting (spin up
  to 300,000 rounds before sleeping; set here as GOMP_SPINCOUNT=300000, which is what libgomp does
  when nothing is set);
- `new`: Sharpen's defaults as shipped (no environment set: Sharpen sets what it sets itself);
- optional extras from --configs: `passive` (OMP_WAIT_POLICY=PASSIVE, a thread per core), `one`
  (one thread, libgomp's own waiting).

It measures: a warm 16-token completion (the document is cached; a few typed words are new), p50/p95;
ms per diffusion pass (the embedded draft model, 64 tokens in 16 passes); and warm completions while a
draft refines in another thread of the same process, as in the editor.

    .venv/bin/python bench/busy_machine.py [--completions N] [--drafts N] [--configs old,new,passive,one]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import describe_machine

BENCH = Path(__file__).resolve().parent

CONFIGS: dict[str, tuple[dict[str, str], int]] = {
    # name: (environment, ar.n_threads and diffusion.n_threads; 0 is Sharpen's choice). Every config but
    # `new` also runs without the priority of completions over draft passes.
    "old": ({"GOMP_SPINCOUNT": "300000"}, len(os.sched_getaffinity(0))),
    "new": ({}, 0),
    "passive": ({"OMP_WAIT_POLICY": "PASSIVE"}, len(os.sched_getaffinity(0))),
    "one": ({"GOMP_SPINCOUNT": "300000"}, 1),
    "spin3k": ({"GOMP_SPINCOUNT": "3000"}, len(os.sched_getaffinity(0))),
    "spin30k": ({"GOMP_SPINCOUNT": "30000"}, len(os.sched_getaffinity(0))),
}
CHILD_DEADLINE_S = 60.0
DOCUMENT = (BENCH / "data" / "documents.txt").read_text().split("===\n")[0]
TYPED = [
    "I",
    "will",
    "send",
    "the",
    "revised",
    "version",
    "on",
    "Friday",
    "so",
    "that",
    "we",
    "can",
    "review",
    "it",
    "together",
]
DRAFT_PROMPT = "Write a short thank-you note to a colleague."


def spin(seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        pass


def start_busy(count: int, seconds: float) -> list[subprocess.Popen[bytes]]:
    code = f"import sys; sys.path.insert(0, {str(BENCH)!r}); from busy_machine import spin; spin({seconds})"
    return [subprocess.Popen([sys.executable, "-c", code]) for _ in range(count)]


def stop_busy(processes: list[subprocess.Popen[bytes]]) -> None:
    for process in processes:
        process.kill()
        process.wait()


# ----- in the child process -----------------------------------------------------------------------


def _service(threads: int) -> Any:
    from app.service import SharpenService
    from app.storage.config import config_from_flat
    from app.storage.paths import sharpen_paths

    config = config_from_flat({"ar.n_threads": threads, "diffusion.n_threads": threads})
    return SharpenService(config, sharpen_paths())


def _complete_once(service: Any, words: int) -> float:
    start = time.perf_counter()
    text = DOCUMENT[:1200] + " " + " ".join(TYPED[:words])
    for _event in service.complete(text, max_tokens=16):
        pass
    return time.perf_counter() - start


def _completions(service: Any, count: int, deadline: float) -> list[float]:
    _complete_once(service, 0)  # loads the model and caches the document
    times = []
    for i in range(count):
        if time.monotonic() > deadline:
            break
        times.append(_complete_once(service, 1 + i % (len(TYPED) - 1)))
    return times


def _draft_passes(service: Any, count: int, deadline: float, stop: threading.Event | None = None) -> list[float]:
    from app.domain.draft_request import DraftRequest
    from engines.events import DiffusionStats

    request = DraftRequest("draft", DRAFT_PROMPT, tokens=64, overrides={"steps": 16}, engine="diffusion")
    per_pass: list[float] = []
    for _ in range(count):
        if time.monotonic() > deadline or (stop is not None and stop.is_set()):
            break
        reply = service.draft(request)
        reply.text()
        if isinstance(reply.done.stats, DiffusionStats):
            per_pass.append(reply.done.stats.ms_per_pass / 1000)
    return per_pass


def child(work: str, threads: int, count: int, priority: bool) -> dict[str, Any]:
    service = _service(threads)
    if not priority:  # the old behaviour: no yielding
        service.engines.foreground.wait = lambda timeout=0.0: 0.0
    deadline = time.monotonic() + CHILD_DEADLINE_S
    if work == "complete":
        return {"complete_s": _completions(service, count, deadline)}
    if work == "draft":
        _draft_passes(service, 1, deadline)  # loads the model
        return {"pass_s": _draft_passes(service, count, deadline)}
    # both: a draft refines in a worker thread while completions are asked for, as in the editor
    _draft_passes(service, 1, deadline)
    _complete_once(service, 0)
    stop = threading.Event()
    passes: list[float] = []
    drafting = threading.Thread(target=lambda: passes.extend(_draft_passes(service, 1000, deadline, stop)))
    drafting.start()
    time.sleep(0.3)
    times = []
    for i in range(count):
        if time.monotonic() > deadline:
            break
        times.append(_complete_once(service, 1 + i % (len(TYPED) - 1)))
        time.sleep(0.2)  # the user types on
    stop.set()
    drafting.join()
    return {"complete_s": times, "pass_s": passes}


# ----- the driver ---------------------------------------------------------------------------------


def run_child(config: str, work: str, count: int) -> dict[str, Any]:
    env_extra, threads = CONFIGS[config]
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "OMP_NUM_THREADS")}
    env |= env_extra
    command = [sys.executable, __file__, "--child", work, "--threads", str(threads), "--count", str(count)]
    if config != "new":
        command.append("--no-priority")
    try:
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=CHILD_DEADLINE_S + 120)
    except subprocess.TimeoutExpired:
        return {"error": "timed out"}
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit {done.returncode}"}
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def cell(values: list[float] | None, expected: int) -> str:
    if not values:
        return "        —        "
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    short = f" ({len(values)}/{expected})" if len(values) < expected else ""
    return f"{statistics.median(values) * 1000:6.0f} /{p95 * 1000:6.0f} ms{short}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--completions", type=int, default=12)
    parser.add_argument("--drafts", type=int, default=3)
    parser.add_argument("--configs", default="old,new")
    parser.add_argument("--busy", default="0,1,2", help="numbers of competing busy processes")
    parser.add_argument("--child", choices=("complete", "draft", "both"), help=argparse.SUPPRESS)
    parser.add_argument("--threads", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--count", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--no-priority", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.threads, args.count, not args.no_priority)))
        return

    configs = args.configs.split(",")
    print(f"machine: {describe_machine()}")
    print(f"load before the bench: {os.getloadavg()[0]:.2f}; configs: {', '.join(configs)}")
    print("cells: p50 / p95; (k/n) when the child's 60 s deadline cut the run short\n")
    columns = ("warm 16-token completion", "ms per pass", "completion while drafting")
    header = f"{'busy':>4} {'config':8} | " + " | ".join(f"{c:>26}" for c in columns)
    print(header)
    print("-" * len(header))
    results: dict[tuple[int, str], dict[str, Any]] = {}
    for busy in (int(b) for b in args.busy.split(",")):
        processes = start_busy(busy, 30 * 60)
        try:
            time.sleep(1.0)
            for config in configs:
                complete = run_child(config, "complete", args.completions)
                draft = run_child(config, "draft", args.drafts)
                both = run_child(config, "both", args.completions // 2)
                results[(busy, config)] = {"complete": complete, "draft": draft, "both": both}
                errors = [r["error"] for r in (complete, draft, both) if "error" in r]
                print(
                    f"{busy:>4} {config:8} | {cell(complete.get('complete_s'), args.completions):>26} | "
                    f"{cell(draft.get('pass_s'), args.drafts):>26} | "
                    f"{cell(both.get('complete_s'), args.completions // 2):>26}"
                    + (f"  errors: {errors}" if errors else ""),
                    flush=True,
                )
        finally:
            stop_busy(processes)

    def median(busy: int, config: str, work: str, key: str) -> float | None:
        values = results.get((busy, config), {}).get(work, {}).get(key)
        return statistics.median(values) if values else None

    print("\nratios to the same config idle (aims: completion <= 2x and pass <= 2.5x with 1 busy process;")
    print("completion while drafting p95 <= 2x the idle completion p95)")
    for config in configs:
        idle_c, idle_p = median(0, config, "complete", "complete_s"), median(0, config, "draft", "pass_s")
        for busy in (int(b) for b in args.busy.split(",") if int(b) > 0):
            c, p = median(busy, config, "complete", "complete_s"), median(busy, config, "draft", "pass_s")
            if idle_c and idle_p and c and p:
                print(f"  {config:8} {busy} busy: completion {c / idle_c:5.2f}x, pass {p / idle_p:5.2f}x")
    if "old" in configs and "new" in configs:
        for work, key, label in (("complete", "complete_s", "completion"), ("draft", "pass_s", "pass")):
            old, new = median(0, "old", work, key), median(0, "new", work, key)
            if old and new:
                print(f"  idle, new / old {label}: {new / old:.3f} ({(new / old - 1) * 100:+.1f}%)")


if __name__ == "__main__":
    main()
