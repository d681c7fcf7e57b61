"""Quality of the embedded diffusion model's drafts, scored by the embedded AR model's perplexity.

20 held-out instructions (ids the training split held out); 128-token drafts at K = N, N/2, N/4, N/8 and
at threshold 0.9 (blocks of 32, greedy), beside SmolLM2-135M's own drafts (the model the data came
from: the ceiling) and a shuffled-word baseline (the words of SmolLM2's drafts in random order: the
floor). Perplexity is SmolLM2's on the draft given the instruction (lower is better).

    .venv/bin/python bench/embedded_quality.py [--model models/embedded/sharpen-draft-q8_0.gguf] [--suppress-eos]
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
from pathlib import Path

import llama_cpp
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import describe_machine

from engines.diffusion.engine import DiffusionEngine
from engines.diffusion.llama_backend import LlamaDiffusionBackend, LlamaDiffusionSettings
from engines.diffusion.settings import DiffusionSettings
from engines.events import Done, DraftStats
from engines.llama_ar import LlamaAREngine, LlamaSettings
from models.catalogue import resolve_model
from models.training.data import Pair, is_held_out, load_pairs

N = 128
DATA = Path(__file__).resolve().parents[1] / "models" / "training" / "data" / "drafts.jsonl"


def perplexity(scorer: llama_cpp.Llama, ar: LlamaAREngine, instruction: str, draft: str) -> float:
    """SmolLM2's perplexity of `draft` as the reply to `instruction` (its chat template)."""
    prompt = ar.chat_prompt(instruction, 1)
    answer = scorer.tokenize(draft.encode(), add_bos=False)[:N] or [scorer.token_eos()]
    scorer.reset()
    scorer.eval(prompt + answer)
    logits = np.array(scorer.scores[len(prompt) - 1 : len(prompt) - 1 + len(answer)], dtype=np.float64)
    shifted = logits - logits.max(axis=1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    nll = -float(np.mean(log_probs[np.arange(len(answer)), answer]))
    return math.exp(nll)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", type=Path, default=Path("models/embedded/sharpen-draft-q8_0.gguf"))
    parser.add_argument("--prompts", type=int, default=20)
    parser.add_argument(
        "--suppress-eos",
        action="store_true",
        help="rank end-of-text proposals last (for models that end drafts early; Sharpen's default ranks them as any)",
    )
    args = parser.parse_args()
    suppress = args.suppress_eos
    pairs: list[Pair] = [p for p in load_pairs(DATA) if is_held_out(p)][: args.prompts]
    source = resolve_model("smollm2-135m-instruct").path
    ar = LlamaAREngine(source, "smollm2-135m-instruct", LlamaSettings(n_ctx=1024))
    scorer = llama_cpp.Llama(str(source), n_ctx=1024, n_batch=512, logits_all=True, verbose=False)
    diffusion = DiffusionEngine(LlamaDiffusionBackend(args.model, LlamaDiffusionSettings(n_ctx=512)), "embedded")
    print(f"machine: {describe_machine()}")
    print(f"{len(pairs)} held-out instructions, {N}-token drafts, greedy, blocks of 32; perplexity by SmolLM2-135M")
    print(f"end-of-text {'ranked last (suppress_eos)' if suppress else 'ranked like any token'}")
    variants = {
        "K=N": DiffusionSettings(steps=N, block_length=32, suppress_eos=suppress),
        "K=N/2": DiffusionSettings(steps=N // 2, block_length=32, suppress_eos=suppress),
        "K=N/4": DiffusionSettings(steps=N // 4, block_length=32, suppress_eos=suppress),
        "K=N/8": DiffusionSettings(steps=N // 8, block_length=32, suppress_eos=suppress),
        "threshold 0.9": DiffusionSettings(threshold=0.9, block_length=32, suppress_eos=suppress),
    }
    scores: dict[str, list[float]] = {name: [] for name in [*variants, "SmolLM2 (AR)", "shuffled words"]}
    passes: dict[str, list[int]] = {name: [] for name in variants}
    samples: dict[str, str] = {}
    rng = random.Random(0)
    for pair in pairs:
        for name, settings in variants.items():
            done = [e for e in diffusion.draft(pair.instruction, N, settings) if isinstance(e, Done)][-1]
            assert isinstance(done.stats, DraftStats)
            passes[name].append(done.stats.passes)
            scores[name].append(perplexity(scorer, ar, pair.instruction, done.text))
            samples.setdefault(name, f"{pair.instruction}\n  -> {done.text.strip()[:300]}")
        ar_text = [e for e in ar.chat(pair.instruction, max_tokens=N) if isinstance(e, Done)][-1].text
        scores["SmolLM2 (AR)"].append(perplexity(scorer, ar, pair.instruction, ar_text))
        words = ar_text.split()
        rng.shuffle(words)
        scores["shuffled words"].append(perplexity(scorer, ar, pair.instruction, " ".join(words)))
    print(f"\n{'drafts':16} | {'median perplexity':>17} | {'log':>5} | passes (median, of {N})")
    for name, values in scores.items():
        taken = f"{statistics.median(passes[name]):.0f}" if name in passes else ""
        median = statistics.median(values)
        print(f"{name:16} | {median:17.1f} | {math.log(median):5.2f} | {taken}")
    print("\nsamples (the first held-out instruction):")
    for name, text in samples.items():
        print(f"[{name}] {text}")


if __name__ == "__main__":
    main()
