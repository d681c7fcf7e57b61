"""What bounds a one-pass block: how much of it the drafter gets right, and what a pass costs.

The speed of block diffusion on the CPU is in one pass a block (K = N/B): B tokens for one decode of 2B rows
(the settled block riding along with the new one), against AR's B decodes of one row. This bench measures
both sides of that trade:

1. torch, on the held-out pairs the training log evaluates, as many pairs it was trained on, or the unseen
   instructions with AR's drafts of them: every answer block fully masked after clean blocks
   (training/one_pass.py), accuracy by offset in the block and by confidence rank, and the
   positions at or above each threshold; the base SmolLM2 alone, causal (blocks of 1), as AR's own
   reference on the same drafts.
2. llama.cpp, after torch is done, against a 200-token cache: one AR row (Q4_1), and for the drafter as the
   service serves it (merged at Q8_0) one decode of 2B rows with logits for the B + 1 the block cache asks
   for; from them the speed of one pass a block as a multiple of AR's, and the tokens a pass would have to
   settle right to be 1.5 times as fast as AR.

    .venv/bin/python bench/one_pass_accuracy.py [--set held-out|trained|unseen] [--adapter PATH] [--blocks 4,8,16]

Run it alone on an idle machine (one torch or llama.cpp job at a time).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch
import training_path  # noqa: F401  (training/ importable)
from block_diffusion import ADAPTER, DOCUMENTS, PROMPT_TOKENS, drafter_file, row_costs
from machine import describe_machine
from unseen_drafts import unseen_pairs

from engines.diffusion.llama_backend import LlamaDiffusionBackend
from engines.diffusion.load_settings import DiffusionLoadSettings
from engines.llama_ar import LlamaAREngine, LlamaSettings
from models.catalogue import resolve_model
from training.adapt.evaluation import EVAL_BATCH
from training.adapt.examples import evaluation_batches, held_out_pairs
from training.adapt.lora import add_lora, base_model, load_adapter
from training.adapt.plan import AdaptPlan
from training.data import Pair, is_held_out, load_pairs
from training.one_pass import THRESHOLDS, OnePassTally, tally_one_pass

DATA = [Path("training/data") / f"drafts{suffix}.jsonl" for suffix in ("", "-open", "-rewrite", "-document")]
AIM = 1.5  # issue #29's speed aim, as a multiple of AR's tokens per second


def tallies(base: Path, adapter: Path, blocks: list[int], rank: int, pairs: list[Pair]) -> dict[str, OnePassTally]:
    torch.set_num_threads(2)
    held = evaluation_batches(base, pairs, AdaptPlan.max_answer, EVAL_BATCH)
    model = base_model(base).eval()

    def tally_all(tally: OnePassTally) -> OnePassTally:
        for tokens, answer in held:
            tally_one_pass(model, tokens, answer, tally)
        return tally

    results = {"AR": tally_all(OnePassTally(1))}
    wrapped = add_lora(model, rank, float(rank))
    load_adapter(wrapped, adapter, base)
    for length in blocks:
        results[f"B{length}"] = tally_all(OnePassTally(length))
    return results


def pass_costs(ar: LlamaAREngine, blocks: list[int], rounds: int) -> tuple[float, dict[int, float]]:
    """One AR row's seconds, and the drafter's for a one-pass block of each length B: one decode of 2B rows
    with logits for the B + 1 the block cache asks for (the settled block's last row and the new block's)."""
    drafter = LlamaDiffusionBackend(drafter_file(), DiffusionLoadSettings(n_ctx=1024, cache="block"))
    document = DOCUMENTS.read_text().split("===\n")[0]
    prompt = ar._llama.tokenize(document.encode(), add_bos=True)[:PROMPT_TOKENS]
    sizes = [2 * length for length in blocks]
    ar_rounds, drafter_rounds = [], []
    for _ in range(rounds):
        ar_rounds.append(row_costs(ar._llama, prompt, sizes=[1])[1])
        drafter_rounds.append(row_costs(drafter._llama, prompt, sizes=sizes, outputs=lambda rows: rows // 2 + 1))
    return statistics.median(ar_rounds), {b // 2: statistics.median(r[b] for r in drafter_rounds) for b in sizes}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--adapter", type=Path, default=ADAPTER)
    parser.add_argument("--blocks", default="4,8,16")
    parser.add_argument("--rank", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--set",
        dest="pair_set",
        choices=("held-out", "trained", "unseen"),
        default="held-out",
        help="the training log's held-out pairs, as many pairs it trained on, or the unseen instructions with AR's "
        "drafts of them",
    )
    parser.add_argument("--prompts", type=int, default=20, help="unseen instructions (--set unseen)")
    args = parser.parse_args()
    blocks = [int(b) for b in args.blocks.split(",")]
    print(f"machine: {describe_machine()}")
    print(f"adapter: {args.adapter}")
    base = resolve_model("smollm2-135m-instruct").path
    ar = LlamaAREngine(base, "smollm2", LlamaSettings(n_ctx=1024))
    if args.pair_set == "unseen":
        pairs = unseen_pairs(ar, args.prompts)
        print(f"{len(pairs)} unseen instructions, AR's drafts of them as the text")
    else:
        everything = [pair for path in DATA for pair in load_pairs(path)]
        pairs = held_out_pairs(everything)
        if args.pair_set == "trained":  # as many, drawn evenly from the files' order
            trained = [pair for pair in everything if not is_held_out(pair)]
            pairs = trained[:: len(trained) // len(pairs)][: len(pairs)]
        print(f"{len(pairs)} {args.pair_set} pairs")
    results = tallies(base, args.adapter, blocks, args.rank, pairs)
    reference = results["AR"]
    print(
        f"\nAR (SmolLM2 alone, causal) on these drafts: {reference.accuracy_at(0):.1%} "
        f"of {reference.counted_at[0]} tokens"
    )
    for length in blocks:
        tally = results[f"B{length}"]
        print(f"\nBlocks of {length}, each fully masked after clean blocks ({tally.blocks} blocks)")
        print("| | " + " | ".join(str(i) for i in range(length)) + " | all |")
        print("|---|" + "---|" * (length + 1))
        overall = sum(tally.right_at) / max(1, sum(tally.counted_at))
        by_offset = " | ".join(f"{tally.accuracy_at(i):.0%}" for i in range(length))
        by_rank = " | ".join(f"{tally.accuracy_of_rank(i):.0%}" for i in range(length))
        print(f"| right, by offset in the block | {by_offset} | {overall:.1%} |")
        print(f"| right, by confidence rank in the block | {by_rank} | |")
        for index, threshold in enumerate(THRESHOLDS):
            sure = tally.confident[index]
            print(
                f"at threshold {threshold}: {tally.per_block(sure):.2f} positions of a block of {length}, "
                f"{tally.confident_right[index] / max(1, sure):.0%} of them right"
            )
    ar_row, costs = pass_costs(ar, blocks, args.rounds)
    print(f"\nOne AR row: {ar_row * 1000:.1f} ms; the drafter (merged at Q8_0), a one-pass block:")
    for length in blocks:
        pass_rows = costs[length] / ar_row
        speed = length / pass_rows
        needed = AIM * pass_rows
        got = results[f"B{length}"].per_block(sum(results[f"B{length}"].right_at))
        print(
            f"blocks of {length}: {2 * length} rows, logits for {length + 1}, cost {pass_rows:.2f} AR rows, so at most "
            f"{speed:.2f}x AR; {AIM}x needs {needed:.1f} of its {length} tokens right every pass, "
            f"the drafter gets {got:.2f} right"
        )


if __name__ == "__main__":
    main()
