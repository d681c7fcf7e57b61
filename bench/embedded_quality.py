"""Quality of the embedded diffusion model's drafts, scored by the embedded AR model's perplexity.

20 held-out instructions: with --set templated (the default) ids the training split held out, with
--set unseen instructions of kinds and subjects that never occur in training (open_prompts.py, the
measure that matters); 128-token drafts at K = N, N/2, N/4, N/8
(with Sharpen's default spacing, and without: LLaDA's reference) and at threshold 0.9 (blocks of 32,
greedy), beside SmolLM2-135M's own drafts (the model the data came from: the ceiling) and a shuffled-word
baseline (the words of SmolLM2's drafts in random order: the floor). Perplexity is SmolLM2's on the draft
given the instruction (lower is better); since it rewards loops, the share of repeated word 3-grams and
the draft's length in words are printed beside it. Last, how often SmolLM2 is 90% sure of its own next
token: a student that learned from it can hardly be surer, and threshold decoding needs a pass for every
token that no pass is 90% sure of.

Each row's position puts its median log-perplexity between SmolLM2's own drafts (0) and the shuffled
words (1); on topic is the share of drafts that name a word of the instruction's subject.

    .venv/bin/python bench/embedded_quality.py [--set templated|unseen] [--model GGUF] [--eos in_order|free|last]
        [--spacing 3] [--prompts 20] [--rows "K=N/4" ...] [--no-repeat-ngram 3 4]

--model takes a diffusion GGUF or one of Sharpen's LoRA adapters (models/adapted.py), which runs on the
embedded SmolLM2 file.
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
import training_path  # noqa: F401  (training/ importable)
from machine import describe_machine

from engines.ar_engine import Sampling
from engines.diffusion.engine import DiffusionEngine
from engines.diffusion.llama_backend import LlamaDiffusionBackend
from engines.diffusion.load_settings import DiffusionLoadSettings
from engines.diffusion.settings import EOS_RULES, DiffusionSettings
from engines.events import DiffusionStats, Done
from engines.llama_ar import LlamaAREngine, LlamaSettings
from models.adapted import adapter_info, is_adapter, verify_base
from models.catalogue import resolve_model
from training.data import is_held_out, load_pairs
from training.open_prompts import on_topic, open_instructions
from training.prompts import instructions

N = 128
DATA = Path(__file__).resolve().parents[1] / "training" / "data" / "drafts.jsonl"


def position(perplexities: list[float], teacher: list[float], shuffled: list[float]) -> float:
    """Where the median log-perplexity lies between the teacher's drafts (0) and their words shuffled (1)."""
    zero, one = (math.log(statistics.median(values)) for values in (teacher, shuffled))
    return (math.log(statistics.median(perplexities)) - zero) / (one - zero)


def scored(
    scorer: llama_cpp.Llama, ar: LlamaAREngine, instruction: str, draft: str, limit: int = N
) -> tuple[float, float]:
    """SmolLM2 reading `draft` (its first `limit` tokens) as the reply to `instruction` (its chat template),
    each token given everything before it: its perplexity, and the share of tokens where SmolLM2 is at
    least 90% sure of its most likely next token."""
    prompt = ar.chat_prompt(instruction, 1)
    answer = scorer.tokenize(draft.encode(), add_bos=False)[:limit] or [scorer.token_eos()]
    scorer.reset()
    scorer.eval(prompt + answer)
    logits = np.array(scorer.scores[len(prompt) - 1 : len(prompt) - 1 + len(answer)], dtype=np.float64)
    shifted = logits - logits.max(axis=1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    perplexity = math.exp(-float(np.mean(log_probs[np.arange(len(answer)), answer])))
    return perplexity, float(np.mean(log_probs.max(axis=1) >= math.log(0.9)))


def repeated_trigrams(text: str) -> float:
    """Share of the draft's word 3-grams that it has already used: perplexity rewards loops, this shows them."""
    words = text.lower().split()
    grams = list(zip(words, words[1:], words[2:], strict=False))
    seen: set[tuple[str, str, str]] = set()
    repeated = 0
    for gram in grams:
        repeated += gram in seen
        seen.add(gram)
    return repeated / len(grams) if grams else 0.0


def prompts_of(kind: str, count: int) -> list[tuple[str, tuple[str, ...]]]:
    """(instruction, topic words) for the held-out templated pairs or the unseen open instructions."""
    if kind == "unseen":
        return [(i.text, i.topic_words) for i in open_instructions(count, quoted=[], held_out=True)]
    topics = {i.id: i.topic for i in instructions(3000)}
    held = [p for p in load_pairs(DATA) if is_held_out(p)][:count]
    return [(p.instruction, tuple(w for w in topics[p.id].lower().split() if len(w) >= 4)) for p in held]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", type=Path, default=Path("models/embedded/sharpen-draft-lora.gguf"))
    parser.add_argument("--prompts", type=int, default=20)
    parser.add_argument("--set", dest="prompt_set", choices=("templated", "unseen"), default="templated")
    parser.add_argument(
        "--eos",
        choices=EOS_RULES,
        default="in_order",
        help="where end-of-text may settle (Sharpen's default, diffusion.eos, is in_order)",
    )
    parser.add_argument(
        "--spacing", type=int, default=3, help="spacing of the K rows (Sharpen's default, diffusion.spacing, is 3)"
    )
    parser.add_argument("--rows", nargs="+", default=None, help='only these rows, e.g. "K=N/4" "threshold 0.9"')
    parser.add_argument(
        "--no-repeat-ngram",
        type=int,
        nargs="*",
        default=[],
        metavar="N",
        help='rows "K=N/2 nr N" and "K=N/4 nr N" too: no n-gram of N tokens repeated (diffusion.no_repeat_ngram)',
    )
    parser.add_argument(
        "--ar-no-repeat-ngram",
        type=int,
        nargs="*",
        default=[],
        metavar="N",
        help='rows "AR nr N" too: SmolLM2 with no n-gram of N tokens repeated (chat.no_repeat_ngram)',
    )
    args = parser.parse_args()
    eos = args.eos
    pairs = prompts_of(args.prompt_set, args.prompts)
    source = resolve_model("smollm2-135m-instruct").path
    ar = LlamaAREngine(source, "smollm2-135m-instruct", LlamaSettings(n_ctx=1024))
    scorer = llama_cpp.Llama(str(source), n_ctx=1024, n_batch=512, logits_all=True, verbose=False)
    if is_adapter(args.model):  # Sharpen's adapted drafter: the embedded AR file with the LoRA applied
        verify_base(source, adapter_info(args.model))
        backend = LlamaDiffusionBackend(source, DiffusionLoadSettings(n_ctx=512), adapter=args.model)
    else:
        backend = LlamaDiffusionBackend(args.model, DiffusionLoadSettings(n_ctx=512))
    diffusion = DiffusionEngine(backend, "embedded")
    print(f"machine: {describe_machine()}")
    print(f"{len(pairs)} {args.prompt_set} instructions, {N}-token drafts, greedy, blocks of 32", end="; ")
    print("perplexity by SmolLM2-135M")
    print(f"end-of-text settles: {eos}; K rows with spacing {args.spacing}, (ref) rows without")
    variants = {"K=N": DiffusionSettings.reference(steps=N, block_length=32, eos=eos, spacing=args.spacing)}
    for divisor in (2, 4, 8):
        for name, spacing in ((f"K=N/{divisor}", args.spacing), (f"K=N/{divisor} (ref)", 0)):
            variants[name] = DiffusionSettings.reference(steps=N // divisor, block_length=32, eos=eos, spacing=spacing)
    variants["threshold 0.9"] = DiffusionSettings.reference(threshold=0.9, block_length=32, eos=eos)
    for n in args.no_repeat_ngram:
        for divisor in (2, 4):
            variants[f"K=N/{divisor} nr {n}"] = DiffusionSettings.reference(
                steps=N // divisor, block_length=32, eos=eos, spacing=args.spacing, no_repeat_ngram=n
            )
    if args.rows:
        unknown = set(args.rows) - set(variants)
        if unknown:
            parser.error(f"unknown rows {sorted(unknown)}; choose from {list(variants)}")
        variants = {name: settings for name, settings in variants.items() if name in args.rows}
    ar_rules = {f"AR nr {n}": Sampling(no_repeat_ngram=n) for n in args.ar_no_repeat_ngram}
    names = [*variants, "SmolLM2 (AR)", *ar_rules, "shuffled words"]
    scores: dict[str, list[float]] = {name: [] for name in names}
    repeats: dict[str, list[float]] = {name: [] for name in names}
    words_out: dict[str, list[int]] = {name: [] for name in names}
    topical: dict[str, list[bool]] = {name: [] for name in names}
    seconds: dict[str, list[float]] = {name: [] for name in variants}
    passes: dict[str, list[int]] = {name: [] for name in variants}
    per_pass: dict[str, list[float]] = {name: [] for name in variants}  # draft tokens per pass
    samples: dict[str, str] = {}
    teacher_sure: list[float] = []
    rng = random.Random(0)
    for instruction, topic_words in pairs:
        for name, settings in variants.items():
            done = [e for e in diffusion.draft(instruction, N, settings) if isinstance(e, Done)][-1]
            assert isinstance(done.stats, DiffusionStats)
            passes[name].append(done.stats.passes)
            seconds[name].append(done.stats.total_s)
            topical[name].append(on_topic(done.text, topic_words))
            per_pass[name].append(done.stats.generated_tokens / max(1, done.stats.passes))
            scores[name].append(scored(scorer, ar, instruction, done.text)[0])
            repeats[name].append(repeated_trigrams(done.text))
            words_out[name].append(len(done.text.split()))
            samples.setdefault(name, f"{instruction}\n  -> {done.text.strip()[:300]}")
        for name, sampling in ar_rules.items():
            text = [e for e in ar.chat(instruction, max_tokens=N, sampling=sampling) if isinstance(e, Done)][-1].text
            scores[name].append(scored(scorer, ar, instruction, text)[0])
            repeats[name].append(repeated_trigrams(text))
            words_out[name].append(len(text.split()))
            topical[name].append(on_topic(text, topic_words))
            samples.setdefault(name, f"{instruction}\n  -> {text.strip()[:300]}")
        ar_text = [e for e in ar.chat(instruction, max_tokens=N) if isinstance(e, Done)][-1].text
        words = ar_text.split()
        rng.shuffle(words)
        for name, text in (("SmolLM2 (AR)", ar_text), ("shuffled words", " ".join(words))):
            perplexity, sure = scored(scorer, ar, instruction, text)
            scores[name].append(perplexity)
            if name == "SmolLM2 (AR)":
                teacher_sure.append(sure)
            repeats[name].append(repeated_trigrams(text))
            words_out[name].append(len(text.split()))
            topical[name].append(on_topic(text, topic_words))
    print(
        f"\n{'drafts':16} | {'median perplexity':>17} | {'log':>5} | {'position':>8} | {'on topic':>8} | "
        f"{'repeated 3-grams':>16} | {'words':>5} | {'s/draft':>7} | passes (median, of {N}) | draft tokens per pass"
    )
    for name, values in scores.items():
        taken = f"{statistics.median(passes[name]):.0f}" if name in passes else ""
        rate = f"{statistics.mean(per_pass[name]):.2f}" if name in per_pass else ""
        median = statistics.median(values)
        reads = position(values, scores["SmolLM2 (AR)"], scores["shuffled words"])
        spent = f"{statistics.median(seconds[name]):.2f}" if name in seconds else ""
        print(
            f"{name:16} | {median:17.1f} | {math.log(median):5.2f} | {reads:8.2f} | "
            f"{statistics.mean(topical[name]):8.0%} | {statistics.mean(repeats[name]):16.0%} | "
            f"{statistics.median(words_out[name]):5.0f} | {spent:>7} | {taken:>23} | {rate}"
        )
    print(
        f"\nSmolLM2 is at least 90% sure of {statistics.mean(teacher_sure):.0%} of its own draft tokens, given every "
        "token before each (mean over the drafts)"
    )
    print("\nsamples (the first held-out instruction):")
    for name, text in samples.items():
        print(f"[{name}] {text}")


if __name__ == "__main__":
    main()
