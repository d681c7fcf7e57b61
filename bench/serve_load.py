"""`sharpen serve` under load: concurrent OpenAI clients on loopback against the embedded models.

The mixed run starts the server in this process on a free loopback port, then runs N clients at once, each
making M requests in turn: a short chat reply (AR), a completion (AR), a 64-token draft streamed by its
stable prefix (diffusion), alternating. A 429 (the engine's queue full) is retried after its Retry-After, as
a well-behaved client does; the bench counts them. Prints per-kind and overall p50/p95 latency, the 429s,
and the machine.

    .venv/bin/python bench/serve_load.py [--clients 16] [--requests 5] [--queue 64]

The burst (`--burst`) is a script that sends a batch at once: a fresh `sharpen serve` with its defaults (a
process of its own, a new SHARPEN_HOME, loopback), then N `openai` clients at their default settings (their
own timeout and retries) start together, each making M short requests in turn (a 16-token chat reply and an
8-token completion, alternating), nothing warmed first; bounded by --deadline-s. Prints the requests
completed and failed, p50/p95 latency, the 429s the server answered (the clients retry them by themselves)
and the server process's peak resident memory.

    .venv/bin/python bench/serve_load.py --burst [--clients 32] [--requests 4] [--deadline-s 900] [--queue N]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import openai

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import describe_machine

from app.server.app import ServerOptions
from app.server.threaded import running_server
from app.service import SharpenService
from app.storage.config import Config, ServerSection
from app.storage.paths import SharpenPaths

INSTRUCTION = "Write a short email to Sam declining the Friday meeting politely."


def one_request(client: openai.OpenAI, kind: str) -> str:
    if kind == "chat":
        reply = client.chat.completions.create(
            model="sharpen", messages=[{"role": "user", "content": "Say hello to Sam."}], max_tokens=16
        )
        return reply.choices[0].message.content or ""
    if kind == "complete":
        return client.completions.create(model="sharpen", prompt="Dear Sam, thanks for", max_tokens=8).choices[0].text
    stream = client.chat.completions.create(
        model="sharpen",
        messages=[{"role": "user", "content": INSTRUCTION}],
        max_tokens=64,
        stream=True,
        extra_body={"sharpen": {"engine": "diffusion"}},
    )
    return "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)


ROOT = Path(__file__).resolve().parents[1]


def percentiles(values: list[float]) -> str:
    """p50 / p95 in milliseconds."""
    if len(values) < 2:
        return "n/a"
    return f"p50 {statistics.median(values) * 1000:.0f} ms  p95 {statistics.quantiles(values, n=20)[18] * 1000:.0f} ms"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def get_json(url: str) -> dict[str, object]:
    with urllib.request.urlopen(url, timeout=10) as response:
        answer: dict[str, object] = json.load(response)
        return answer


def peak_rss_mib(pid: int) -> float | None:
    """The process's peak resident set size (Linux's VmHWM), in MiB; None where /proc does not say."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


@contextmanager
def sharpen_serve(home: Path, queue: int | None) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """A fresh `sharpen serve` with its defaults (but `queue`, where given) in a process of its own, on a free
    loopback port."""
    port = free_port()
    env = os.environ | {"SHARPEN_HOME": str(home)}
    command = [sys.executable, "-m", "app.cli", "serve", "--host", "127.0.0.1", "--port", str(port)]
    command += [] if queue is None else ["--queue", str(queue)]
    server = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                get_json(f"{url}/v1/models")
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("sharpen serve did not start") from None
                time.sleep(0.2)
        yield url, server
    finally:
        server.send_signal(signal.SIGINT)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def burst(clients: int, requests: int, deadline_s: float, queue: int | None) -> None:
    """N openai clients at their default settings start together against a fresh `sharpen serve`."""
    latencies: list[float] = []
    failed: list[str] = []
    not_sent = 0
    lock = threading.Lock()
    with tempfile.TemporaryDirectory() as home, sharpen_serve(Path(home), queue) as (url, server):
        start_together = threading.Barrier(clients)
        stop_at = time.monotonic() + deadline_s

        def client_loop(number: int) -> None:
            nonlocal not_sent
            client = openai.OpenAI(base_url=f"{url}/v1", api_key="none")  # the client's own defaults
            start_together.wait()
            for turn in range(requests):
                if time.monotonic() > stop_at:
                    with lock:
                        not_sent += 1
                    continue
                kind = ("chat", "complete")[(number + turn) % 2]
                started = time.perf_counter()
                try:
                    text = one_request(client, kind)
                except openai.APIError as error:
                    with lock:
                        failed.append(f"{kind}: {type(error).__name__}: {error}")
                    continue
                elapsed = time.perf_counter() - started
                with lock:
                    if text:
                        latencies.append(elapsed)
                    else:
                        failed.append(f"{kind}: empty text")

        threads = [threading.Thread(target=client_loop, args=(n,), daemon=True) for n in range(clients)]
        began = time.perf_counter()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=max(0.0, stop_at - time.monotonic()) + 5)
        wall = time.perf_counter() - began
        engines = get_json(f"{url}/v1/sharpen/status")["engines"]
        assert isinstance(engines, dict)
        refused = sum(int(queue["refused"]) for queue in engines.values())
        waiting = int(engines["ar"]["capacity"]) - 1  # the server's own server.queue
        peak = peak_rss_mib(server.pid)
    unanswered = clients * requests - len(latencies) - len(failed) - not_sent
    print(f"burst: {clients} openai clients at once (their default settings), {requests} short requests each,")
    print(f"against a fresh `sharpen serve` (server.queue {waiting}), {wall:.1f} s in all")
    print(f"completed {len(latencies)}, failed {len(failed)}, not sent (deadline) {not_sent}, unanswered {unanswered}")
    print(f"429s answered by the server (the clients retry them) {refused}")
    print(f"latency {percentiles(latencies)}")
    print(f"server peak RSS {peak:.0f} MiB" if peak is not None else "server peak RSS: unknown (no /proc)")
    for line in failed[:5]:
        print(f"  failed {line}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--burst", action="store_true", help="a batch at once against a fresh `sharpen serve`")
    parser.add_argument("--clients", type=int, help="clients at once (default 16; 32 with --burst)")
    parser.add_argument("--requests", type=int, help="requests each client makes (default 5; 4 with --burst)")
    parser.add_argument(
        "--queue", type=int, help="server.queue: requests waiting per engine (default: the configured default)"
    )
    parser.add_argument("--deadline-s", type=float, default=900.0, help="--burst: no request is sent after this")
    args = parser.parse_args()
    print(describe_machine())
    if args.burst:
        burst(args.clients or 32, args.requests or 4, args.deadline_s, args.queue)
        return
    args.clients, args.requests = args.clients or 16, args.requests or 5
    args.queue = ServerSection().queue if args.queue is None else args.queue
    kinds = ("chat", "complete", "draft")
    latencies: dict[str, list[float]] = defaultdict(list)
    refusals = 0
    lost: list[str] = []
    lock = threading.Lock()
    with tempfile.TemporaryDirectory() as home:
        service = SharpenService(Config(), SharpenPaths.under(Path(home)))
        with running_server(service, ServerOptions(queue=args.queue)) as url:
            warm = openai.OpenAI(base_url=f"{url}/v1", api_key="none", max_retries=0)
            for kind in kinds:  # loads both engines before the clock starts
                one_request(warm, kind)

            def client_loop(number: int) -> None:
                nonlocal refusals
                client = openai.OpenAI(base_url=f"{url}/v1", api_key="none", max_retries=0, timeout=300)
                for turn in range(args.requests):
                    kind = kinds[(number + turn) % len(kinds)]
                    start = time.perf_counter()
                    while True:
                        try:
                            text = one_request(client, kind)
                            break
                        except openai.RateLimitError as error:
                            with lock:
                                refusals += 1
                            time.sleep(float(error.response.headers.get("retry-after", "1")))
                        except openai.APIError as error:
                            with lock:
                                lost.append(f"{kind}: {error}")
                            return
                    with lock:
                        latencies[kind].append(time.perf_counter() - start)
                        if not text:
                            lost.append(f"{kind}: empty text")

            started = time.perf_counter()
            threads = [threading.Thread(target=client_loop, args=(n,)) for n in range(args.clients)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            wall = time.perf_counter() - started
    done = sum(len(v) for v in latencies.values())
    print(f"{args.clients} clients x {args.requests} requests, queue {args.queue} per engine: {done} answered")
    print(f"in {wall:.1f} s; {refusals} answered 429 first (retried after Retry-After); lost: {len(lost)}")
    for line in lost[:5]:
        print(f"  lost {line}")
    every = [value for values in latencies.values() for value in values]
    for kind, values in [*sorted(latencies.items()), ("all", every)]:
        if len(values) >= 2:
            print(f"{kind:>9}: n={len(values):3d}  {percentiles(values)}")


if __name__ == "__main__":
    main()
