"""What a block pass of the embedded drafter costs at each type its merged weights could be stored in.

The service merges the drafter's LoRA into SmolLM2 once and serves that copy at Q8_0 (models/adapted.py).
This bench writes the same merge at Q8_0, BF16 and F16 and times one llama.cpp decode of b rows (logits
for each) against a 200-token cache for each of them and for the AR model beside it (SmolLM2 Q4_1, causal),
the files interleaved over `--rounds` rounds, medians of each round's median of 5. A block of 8 at the
router's K = N/4 costs a 16-row pass (the settled block riding along) and an 8-row pass: the last column
is that pair per token, relative to one AR row. On an AMD EPYC with AVX512_BF16, llama.cpp's BF16 kernels
made the block passes cheaper than Q8_0's (training/NOTES.md); other CPUs were not measured.
One llama.cpp job at a time: run it on an idle machine, without OMP_WAIT_POLICY=PASSIVE (it made an 8-row
pass 2.6 times as costly on 2 cores).

    .venv/bin/python bench/merged_types.py [--types Q8_0,BF16,F16] [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import llama_cpp
from block_diffusion import DOCUMENTS, PROMPT_TOKENS, ROWS, drafter_file, row_costs
from machine import describe_machine

from engines.diffusion.llama_backend import LlamaDiffusionBackend
from engines.diffusion.load_settings import DiffusionLoadSettings
from engines.llama_ar import LlamaAREngine, LlamaSettings
from models.catalogue import resolve_model

BLOCK = 8


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--types", default="Q8_0,BF16,F16")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(f"machine: {describe_machine()}")
    print(f"llama.cpp: {llama_cpp.llama_print_system_info().decode().strip()}")
    base = resolve_model("smollm2-135m-instruct").path
    ar = LlamaAREngine(base, "smollm2", LlamaSettings(n_ctx=1024))
    document = DOCUMENTS.read_text().split("===\n")[0]
    prompt = ar._llama.tokenize(document.encode(), add_bos=True)[:PROMPT_TOKENS]
    llamas = {"SmolLM2-135M-Instruct Q4_1 (AR)": ar._llama}
    for quantization in args.types.split(","):
        backend = LlamaDiffusionBackend(drafter_file(quantization), DiffusionLoadSettings(n_ctx=1024, cache="block"))
        llamas[f"sharpen-draft merged at {quantization}"] = backend._llama
    rounds: dict[str, list[dict[int, float]]] = {label: [] for label in llamas}
    for _ in range(args.rounds):
        for label, llama in llamas.items():
            rounds[label].append(row_costs(llama, prompt))
    costs = {label: {b: statistics.median(r[b] for r in runs) for b in ROWS} for label, runs in rounds.items()}
    one_ar_row = costs["SmolLM2-135M-Instruct Q4_1 (AR)"][1]
    print(f"\nOne decode of b rows against a {len(prompt)}-token cache, ms (median of {args.rounds} rounds)")
    print(f"| file | {' | '.join(str(b) for b in ROWS)} | block of {BLOCK} at K = N/4, per token, x one AR row |")
    print(f"|---|{'---|' * len(ROWS)}---|")
    for label, cost in costs.items():
        cells = " | ".join(f"{cost[b] * 1000:.1f}" for b in ROWS)
        per_token = (cost[2 * BLOCK] + cost[BLOCK]) / BLOCK / one_ar_row
        print(f"| {label} | {cells} | {'' if '(AR)' in label else f'{per_token:.2f}'} |")


if __name__ == "__main__":
    main()
