"""Autocomplete latency: Sharpen's AR engine against a bare llama-cpp-python call, side by side.

For each of 25 prefixes (5 documents cut at 50, 120, 200, 300 and 400 words) it measures the time to
the first token and to 8 and 16 tokens, cold (a new document: empty KV cache) and warm (the same
document after three more typed words). Sharpen and the bare call each own a llama.cpp context with the
same model and settings, and run alternately on the same prefix, so machine noise hits both alike.

    .venv/bin/python bench/autocomplete.py [--model PATH] [--repeat N]
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import llama_cpp

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import describe_machine

from engines.events import Token
from engines.llama_ar import LlamaAREngine, LlamaSettings
from engines.threads import available_cores
from models.catalogue import resolve_model

CUTS = (50, 120, 200, 300, 400)
TYPED_WORDS = 3
MAX_TOKENS = 16
N_CTX = 2048
DOCUMENTS = Path(__file__).resolve().parent / "data" / "documents.txt"


def prefixes() -> Iterator[tuple[str, str]]:
    """(prefix, prefix plus three more typed words) for every document and cut."""
    for document in DOCUMENTS.read_text().split("===\n"):
        ends = [m.end() for m in re.finditer(r"\S+", document)]
        for cut in CUTS:
            yield document[: ends[cut - 1]], document[: ends[cut - 1 + TYPED_WORDS]]


@dataclass
class Timings:
    first: list[float] = field(default_factory=list)
    at8: list[float] = field(default_factory=list)
    at16: list[float] = field(default_factory=list)

    def add(self, marks: dict[int, float]) -> None:
        self.first.append(marks[1])
        if 8 in marks:
            self.at8.append(marks[8])
        if 16 in marks:
            self.at16.append(marks[16])


def sharpen_marks(engine: LlamaAREngine, text: str) -> dict[int, float]:
    start = time.perf_counter()
    marks: dict[int, float] = {}
    for event in engine.complete(text, max_tokens=MAX_TOKENS):
        if isinstance(event, Token):
            marks.setdefault(event.index + 1, time.perf_counter() - start)
    return marks


def bare_marks(llm: llama_cpp.Llama, text: str) -> dict[int, float]:
    start = time.perf_counter()
    marks: dict[int, float] = {}
    chunks = llm.create_completion(text, max_tokens=MAX_TOKENS, temperature=0.0, stream=True)
    for count, _chunk in enumerate(chunks, start=1):
        marks.setdefault(count, time.perf_counter() - start)
    return marks


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--repeat", type=int, default=1, help="passes over the 25 prefixes")
    args = parser.parse_args()
    model = resolve_model(args.model)
    threads = available_cores()
    engine = LlamaAREngine(model.path, model.name, LlamaSettings(n_ctx=N_CTX, n_threads=threads, n_batch=512))
    bare = llama_cpp.Llama(
        str(model.path), n_ctx=N_CTX, n_batch=512, n_threads=threads, n_threads_batch=threads, verbose=False
    )
    results = {(who, phase): Timings() for who in ("sharpen", "bare") for phase in ("cold", "warm")}
    cases = list(prefixes()) * args.repeat
    print(f"machine: {describe_machine()}")
    print(f"model: {model.path.name} | n_ctx {N_CTX} | threads {threads} | {len(cases)} prefixes of 50-400 words")
    sharpen_marks(engine, "Warm-up.")
    bare_marks(bare, "Warm-up.")
    for prefix, typed in cases:
        for who, run in (("sharpen", lambda t: sharpen_marks(engine, t)), ("bare", lambda t: bare_marks(bare, t))):
            engine._llama.reset()  # a new document: nothing cached
            bare.reset()
            results[(who, "cold")].add(run(prefix))
            results[(who, "warm")].add(run(typed))

    header = f"{'':8} {'phase':5} | {'first token p50/p95':>20} | {'8 tokens p50/p95':>18} | {'16 tokens p50/p95':>19}"
    print(header)
    print("-" * len(header))
    for (who, phase), t in results.items():
        cells = [
            f"{percentile(v, 0.5) * 1000:7.0f} /{percentile(v, 0.95) * 1000:5.0f} ms" for v in (t.first, t.at8, t.at16)
        ]
        print(f"{who:8} {phase:5} | {cells[0]:>20} | {cells[1]:>18} | {cells[2]:>19}")
    for phase in ("cold", "warm"):
        ours = statistics.median(results[("sharpen", phase)].at16)
        theirs = statistics.median(results[("bare", phase)].at16)
        ratio = ours / theirs
        print(f"{phase}: Sharpen / bare, median time to 16 tokens: {ratio:.3f}  ({(ratio - 1) * 100:+.1f}%)")
    warm16 = percentile(results[("sharpen", "warm")].at16, 0.5) * 1000
    verdict = "met" if warm16 <= 250 else "MISSED"
    print(f"target: warm p50 to a 16-token suggestion <= 250 ms: {warm16:.0f} ms -> {verdict}")


if __name__ == "__main__":
    main()
