"""What the writing adapter (`sharpen-write`, an AR LoRA on SmolLM2-135M's Q4_1 file) costs per token, applied
at run time or merged at each type, and whether each merge keeps what the adapter changes.

Side by side in one run, the files interleaved over `--rounds` rounds (medians over every draft): the prompt
and a 128-token greedy draft (end-of-text banned, so every file writes 128 tokens) on the faithfulness bench's
held-out documents laid out as the AR drafter lays a draft into a document out, for the base alone, the base
with the LoRA applied by llama.cpp at load, and the LoRA merged into its matrices (models/adapted.py's
merge_lora) at each of `--types` (gguf-py quantizes no K-quant such as Q6_K, so Q5_1 stands between Q4_1 and
Q8_0). Fidelity: next-token logits at every position of a teacher-forced continuation (the F32 merge's own
greedy draft, `--positions` tokens) against the F32 merge, which is the adapted model exactly (the base's Q4_1
weights plus the update in F32): mean and max |difference| as a share of the adapter's own effect (the F32
merge against the base), argmax agreement, and of the positions where the adapter changes the base's argmax,
the share each file changes too. A near-zero adapter (a smoke run) times the files but says nothing of
fidelity: measure that on a trained one.

    .venv/bin/python bench/write_adapter_cost.py --adapter FILE [--types Q8_0,Q5_1,Q4_1,F16] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import llama_cpp
from faithful_cases import load_cases, spread
from machine import describe_machine

from app.domain.context import continued_reply
from engines.llama_ar import LlamaAREngine, LlamaSettings
from models.adapted import adapter_info, merge_lora, verify_base
from models.catalogue import resolve_model

TOKENS = 128
BASE = "base Q4_1"
APPLIED = "base + LoRA at load"
REFERENCE = "F32"


@dataclass(frozen=True)
class Timed:
    prompt_tokens: int
    first_token_s: float  # the prompt evaluated and the first token drawn
    per_token_s: float  # each of the other tokens
    draft_s: float  # the whole 128-token draft
    tokens: list[int]


class BanEndOfText:
    """A logits processor that never lets the model end its reply, so every file writes as many tokens."""

    def __init__(self, llama: llama_cpp.Llama) -> None:
        vocab = llama._model.vocab
        self.ids = [i for i in range(llama.n_vocab()) if llama_cpp.llama_vocab_is_eog(vocab, i)]

    def __call__(self, _input_ids: np.ndarray, scores: np.ndarray) -> np.ndarray:
        scores[self.ids] = -np.inf
        return scores


def timed_draft(engine: LlamaAREngine, prompt: list[int], tokens: int = TOKENS) -> Timed:
    """A cold greedy draft of `tokens` tokens through llama-cpp-python's sampling loop, as the engine runs one."""
    llama = engine._llama
    llama.reset()
    rules = llama_cpp.LogitsProcessorList([BanEndOfText(llama)])
    written: list[int] = []
    start = time.perf_counter()
    first = start
    for token in llama.generate(prompt, temp=0.0, logits_processor=rules):
        if not written:
            first = time.perf_counter()
        written.append(token)
        if len(written) == tokens:
            break
    end = time.perf_counter()
    return Timed(len(prompt), first - start, (end - first) / (tokens - 1), end - start, written)


def next_token_logits(engine: LlamaAREngine, prompt: list[int], continuation: Sequence[int]) -> np.ndarray:
    """The logits for the next token after `prompt` and after each of `continuation`'s tokens but the last:
    (len(continuation), vocabulary)."""
    llama = engine._llama
    llama.reset()
    rows = []
    for chunk in [prompt, *([token] for token in continuation[:-1])]:
        llama.eval(chunk)
        rows.append(np.ctypeslib.as_array(llama._ctx.get_logits(), shape=(llama.n_vocab(),)).copy())
    return np.stack(rows)


def prompts(engine: LlamaAREngine, count: int) -> list[list[int]]:
    """Held-out documents of the faithfulness bench, laid out as the AR drafter lays a draft into one out."""
    cases = spread(tuple(case for case in load_cases().cases if case.held_out), count)
    laid_out = [continued_reply(case.instruction, case.before, case.after) for case in cases]
    return [engine.chat_prompt(reply.request, TOKENS, reply.reply_start) for reply in laid_out]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--adapter", type=Path, required=True, help="a LoRA GGUF for SmolLM2-135M-Instruct Q4_1")
    parser.add_argument("--types", default="Q8_0,Q5_1,Q4_1,F16", help="ggml types to merge into (gguf-py's)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--prompts", type=int, default=4)
    parser.add_argument("--positions", type=int, default=32, help="teacher-forced positions per prompt")
    args = parser.parse_args()
    cores = len(os.sched_getaffinity(0))
    print(f"machine: {describe_machine()}")
    print(f"llama.cpp: {llama_cpp.llama_print_system_info().decode().strip()}")
    base = resolve_model("smollm2-135m-instruct").path
    info = adapter_info(args.adapter)
    verify_base(base, info)
    kind = "diffusion (run here as AR)" if info.makes_diffusion else "AR"
    print(f"adapter: {args.adapter} ({kind}, rank {info.rank}, alpha {info.alpha:g}); threads: {cores}")
    settings = LlamaSettings(n_ctx=1024, n_threads=cores)
    with tempfile.TemporaryDirectory() as folder:
        files: dict[str, Path] = {}
        print("\n| merged at | seconds to merge | MB |\n|---|---|---|")
        for quantization in [REFERENCE, *args.types.split(",")]:
            out = Path(folder) / f"merged-{quantization.lower()}.gguf"
            started = time.perf_counter()
            merge_lora(base, args.adapter, out, quantization, info.alpha / info.rank)
            files[f"merged {quantization}"] = out
            print(f"| {quantization} | {time.perf_counter() - started:.1f} | {out.stat().st_size / 1e6:.0f} |")
        engines = {
            BASE: LlamaAREngine(base, BASE, settings),
            APPLIED: LlamaAREngine(base, APPLIED, settings, adapter=args.adapter),
            **{label: LlamaAREngine(path, label, settings) for label, path in files.items()},
        }
        laid_out = prompts(engines[BASE], args.prompts)
        for engine in engines.values():  # each file's first draft loads pages and warms caches: not timed
            timed_draft(engine, laid_out[0], 8)
        timed: dict[str, list[Timed]] = {label: [] for label in engines}
        for _ in range(args.rounds):
            for prompt in laid_out:
                for label, engine in engines.items():  # interleaved: a busy moment hits every file alike
                    timed[label].append(timed_draft(engine, prompt))
        print_costs(timed)
        print_fidelity(engines, laid_out, timed[f"merged {REFERENCE}"][: len(laid_out)], args.positions)


def print_costs(timed: dict[str, list[Timed]]) -> None:
    runs = len(next(iter(timed.values())))
    prompt_tokens = statistics.mean(t.prompt_tokens for t in next(iter(timed.values())))
    base_rate = 1 / statistics.median(t.per_token_s for t in timed[BASE])
    print(f"\n{runs} cold {TOKENS}-token greedy drafts per file, prompts of {prompt_tokens:.0f} tokens (medians)")
    print("| file | prompt + first token, s | tokens/s | x base | 128-token draft, s |")
    print("|---|---|---|---|---|")
    for label, runs_of in timed.items():
        rate = 1 / statistics.median(t.per_token_s for t in runs_of)
        first = statistics.median(t.first_token_s for t in runs_of)
        draft = statistics.median(t.draft_s for t in runs_of)
        print(f"| {label} | {first:.3f} | {rate:.1f} | {rate / base_rate:.2f} | {draft:.2f} |")


def print_fidelity(
    engines: dict[str, LlamaAREngine], laid_out: list[list[int]], reference_drafts: list[Timed], positions: int
) -> None:
    logits: dict[str, list[np.ndarray]] = {label: [] for label in engines}
    for prompt, draft in zip(laid_out, reference_drafts, strict=True):
        for label, engine in engines.items():
            logits[label].append(next_token_logits(engine, prompt, draft.tokens[:positions]))
    stacked = {label: np.concatenate(rows) for label, rows in logits.items()}
    reference = stacked[f"merged {REFERENCE}"]
    effect = np.abs(reference - stacked[BASE])
    changed = reference.argmax(1) != stacked[BASE].argmax(1)
    print(
        f"\nNext-token logits at {len(reference)} teacher-forced positions against the F32 merge (the adapted "
        f"model exactly); the adapter's own effect there: mean |Δ| {effect.mean():.3f}, max {effect.max():.2f}, "
        f"the argmax changed at {changed.sum()} positions"
    )
    print("| file | mean abs diff | x the effect | max abs diff | argmax agrees | changed argmaxes kept |")
    print("|---|---|---|---|---|---|")
    for label, values in stacked.items():
        difference = np.abs(values - reference)
        agrees = values.argmax(1) == reference.argmax(1)
        kept = f"{agrees[changed].mean():.0%}" if changed.any() else "-"
        print(
            f"| {label} | {difference.mean():.4f} | {difference.mean() / max(effect.mean(), 1e-9):.2f} | "
            f"{difference.max():.3f} | {agrees.mean():.1%} | {kept} |"
        )


if __name__ == "__main__":
    main()
