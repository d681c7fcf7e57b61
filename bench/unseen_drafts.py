"""AR's drafts of unseen instructions (kinds and subjects never trained on, training/open_prompts.py),
written as a fresh install's AR drafts are (greedy, chat.no_repeat_ngram), as long as a training answer may be:
the text a one-pass block is scored against (bench/one_pass_accuracy.py --set unseen) and, from another seed,
the set a training run chooses its best adapter by (python -m training.adapt --unseen), so that the benches'
20 instructions (seed 0) never choose what they then measure.

    .venv/bin/python bench/unseen_drafts.py --seed 1 --prompts 20 --write training/out-gpu/unseen.jsonl
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import training_path  # noqa: F401  (training/ importable)

from app.storage.config import ChatSection
from engines.ar_engine import Sampling
from engines.events import Token
from engines.llama_ar import LlamaAREngine, LlamaSettings
from models.catalogue import resolve_model
from training.adapt.plan import AdaptPlan
from training.data import Pair
from training.open_prompts import open_instructions


def unseen_pairs(ar: LlamaAREngine, count: int, seed: int = 0) -> list[Pair]:
    """`count` unseen instructions of SEED with AR's drafts of them, greedy with a fresh install's loop control."""
    sampling = Sampling(no_repeat_ngram=ChatSection().no_repeat_ngram)
    pairs = []
    for number, instruction in enumerate(open_instructions(count, quoted=[], held_out=True, seed=seed)):
        events = ar.chat(instruction.text, max_tokens=AdaptPlan.max_answer, sampling=sampling)
        draft = "".join(event.text for event in events if isinstance(event, Token))
        pairs.append(Pair(number, instruction.text, draft))
    return pairs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--prompts", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1, help="0 is the benches' set: choose with another")
    parser.add_argument("--write", type=Path, required=True, help="the pairs, one JSON record a line")
    args = parser.parse_args()
    ar = LlamaAREngine(resolve_model("smollm2-135m-instruct").path, "smollm2", LlamaSettings(n_ctx=1024))
    pairs = unseen_pairs(ar, args.prompts, args.seed)
    args.write.parent.mkdir(parents=True, exist_ok=True)
    with args.write.open("w", encoding="utf-8") as handle:
        for pair in pairs:
            handle.write(json.dumps({"id": pair.id, "text": pair.instruction, "draft": pair.draft}) + "\n")
    print(f"{len(pairs)} unseen instructions (seed {args.seed}) with AR's drafts: {args.write}")


if __name__ == "__main__":
    main()
