"""`sharpen serve` under load: concurrent OpenAI clients on loopback against the embedded models.

Starts the server in this process on a free loopback port, then runs N clients at once, each making M
requests in turn: a short chat reply (AR), a completion (AR), a 64-token draft streamed by its stable
prefix (diffusion), alternating. A 429 (the engine's queue full) is retried after its Retry-After, as a
well-behaved client does; the bench counts them. Prints per-kind and overall p50/p95 latency, the 429s,
and the machine.

    .venv/bin/python bench/serve_load.py [--clients 16] [--requests 5] [--queue 4]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path

import openai

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import describe_machine

from app.server.app import ServerOptions
from app.server.threaded import running_server
from app.service import SharpenService
from app.storage.config import Config
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--requests", type=int, default=5)
    parser.add_argument("--queue", type=int, default=4, help="server.queue: requests waiting per engine")
    args = parser.parse_args()
    print(describe_machine())
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
            cuts = statistics.quantiles(values, n=20)
            p50, p95 = statistics.median(values), cuts[18]
            print(f"{kind:>9}: n={len(values):3d}  p50 {p50 * 1000:8.0f} ms  p95 {p95 * 1000:8.0f} ms")


if __name__ == "__main__":
    main()
