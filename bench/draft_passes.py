"""Where a draft's time goes: each llama.cpp decode of whole drafts timed, by its shape, for both engines.

The unseen instructions (training/open_prompts.py) drafted at N tokens through a fresh install's
service, each engine forced, the two interleaved. Every llama_decode call is timed and sorted by its shape
(rows decoded, rows whose logits were asked for): for the diffusion drafter under the block cache that is a
block's first pass with the settled block riding along (2B rows), its later passes (B rows) and the
prompt's clean passes; for AR, its prompt and one row a token. Printed per engine: milliseconds a token,
the share of the draft's time spent in llama.cpp's decodes (the rest is Python: the sampler and its
rules), and per shape the count, the mean milliseconds and the share of the time. The last line is what
the drafter's milliseconds a token would have to be for 1.5x AR's speed (issue #29's aim).
One llama.cpp job at a time: run it on an idle machine.

    .venv/bin/python bench/draft_passes.py [--prompts 10] [--tokens 256] [--set diffusion.kv_type=f16 ...]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import llama_cpp
import llama_cpp.llama_cpp as llama_cpp_module
from drafter_vs_ar import fresh_install
from embedded_quality import prompts_of
from machine import describe_machine

from app.domain.draft_request import DraftRequest
from router.request import EngineName

ENGINES: tuple[EngineName, ...] = ("diffusion", "ar")
Shape = tuple[int, int]  # rows decoded, rows with logits


class DecodeClock:
    """Times every llama_decode call made while `engine` is set, by the batch's shape."""

    def __init__(self) -> None:
        self.engine: EngineName | None = None
        self.calls: dict[EngineName, dict[Shape, list[float]]] = {engine: defaultdict(list) for engine in ENGINES}
        self._original: Callable[..., int] = llama_cpp_module.llama_decode

    def install(self) -> None:
        # Both names: the diffusion backend calls the package's, llama-cpp-python's own context the module's.
        llama_cpp.llama_decode = self._timed
        llama_cpp_module.llama_decode = self._timed

    def _timed(self, ctx: Any, batch: Any) -> int:
        started = time.perf_counter()
        code = self._original(ctx, batch)
        if self.engine is not None:
            rows = int(batch.n_tokens)
            outputs = sum(1 for i in range(rows) if batch.logits[i])
            self.calls[self.engine][rows, outputs].append(time.perf_counter() - started)
        return code


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--prompts", type=int, default=10)
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a setting changed")
    args = parser.parse_args()
    print(f"machine: {describe_machine()}")
    service = fresh_install(args.set)
    pairs = prompts_of("unseen", args.prompts)
    for engine in ENGINES:  # loads each model before the clock starts
        service.draft(DraftRequest("draft", pairs[0][0], tokens=16, engine=engine)).text()
    clock = DecodeClock()
    clock.install()
    seconds: dict[EngineName, float] = dict.fromkeys(ENGINES, 0.0)
    tokens: dict[EngineName, int] = dict.fromkeys(ENGINES, 0)
    for instruction, _ in pairs:
        for engine in ENGINES:
            clock.engine = engine
            reply = service.draft(DraftRequest("draft", instruction, tokens=args.tokens, engine=engine))
            reply.text()
            clock.engine = None
            assert reply.done is not None
            seconds[engine] += reply.done.stats.total_s
            tokens[engine] += reply.done.stats.generated_tokens
    print(f"\n{len(pairs)} unseen instructions, {args.tokens} tokens asked; settings: {args.set or 'defaults'}")
    print("| engine | tokens | ms a token | in decodes | decode shape (rows, with logits) | count | mean ms | share |")
    print("|---|---|---|---|---|---|---|---|")
    per_token: dict[EngineName, float] = {}
    for engine in ENGINES:
        calls = clock.calls[engine]
        decoding = sum(sum(times) for times in calls.values())
        per_token[engine] = seconds[engine] / max(1, tokens[engine]) * 1000
        head = f"| {engine} | {tokens[engine]} | {per_token[engine]:.2f} | {decoding / seconds[engine]:.0%} |"
        shapes = sorted(calls, key=lambda shape: -sum(calls[shape]))
        for index, shape in enumerate(shapes[:6]):
            times = calls[shape]
            lead = head if index == 0 else "| | | | |"
            print(
                f"{lead} {shape} | {len(times)} | {statistics.mean(times) * 1000:.1f} | "
                f"{sum(times) / seconds[engine]:.0%} |"
            )
        if len(shapes) > 6:
            rest = [t for shape in shapes[6:] for t in calls[shape]]
            print(f"| | | | | {len(shapes) - 6} other shapes | {len(rest)} | | {sum(rest) / seconds[engine]:.0%} |")
    ratio = per_token["ar"] / per_token["diffusion"]
    print(f"\ndiffusion at {ratio:.2f}x AR's tokens a second; 1.5x needs {per_token['ar'] / 1.5:.2f} ms a token")


if __name__ == "__main__":
    main()
