"""AR drafts of the unseen open instructions (training/open_prompts.py) through the service, at a fresh
install's settings with each `--variant`'s changes: on topic, repeated word 3-grams, the tries a checked
draft took (chat.fact_tries) and seconds a draft. The AR half of bench/drafter_vs_ar.py, cheap enough to
compare settings of the AR drafter (no diffusion drafts, no perplexity scoring).

    flock /tmp/sharpen-cpu.lock .venv/bin/python bench/open_prompts_ar.py [--prompts 20] [--tokens 128]
        [--set KEY=VALUE ...] --variant "tries 1:chat.fact_tries=1" --variant "tries 4:chat.fact_tries=4"
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import training_path  # noqa: F401  (training/ importable)
from drafter_vs_ar import fresh_install
from embedded_quality import prompts_of, repeated_trigrams
from machine import describe_machine

from app.domain.draft_request import DraftRequest
from training.open_prompts import on_topic


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--prompts", type=int, default=20)
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a setting of every variant")
    parser.add_argument(
        "--variant", action="append", default=[], metavar="LABEL:KEY=VALUE[;KEY=VALUE]", help="a variant's changes"
    )
    args = parser.parse_args()
    variants = [variant.partition(":") for variant in args.variant] or [("defaults", ":", "")]
    services = {
        label: fresh_install([*args.set, *[c for c in changes.split(";") if c]]) for label, _, changes in variants
    }
    print(f"machine: {describe_machine()}")
    print(f"command: {' '.join(['python', *sys.argv])}")
    pairs = prompts_of("unseen", args.prompts)
    rows: dict[str, list[tuple[bool, float, int, float]]] = {label: [] for label in services}
    for instruction, topic_words in pairs:
        for label, service in services.items():  # interleaved: the machine's noise falls on all alike
            reply = service.draft(DraftRequest("draft", instruction, tokens=args.tokens, engine="ar"))
            text = reply.text()
            assert reply.done is not None
            tries = reply.checked.tries if reply.checked is not None else 1
            rows[label].append((on_topic(text, topic_words), repeated_trigrams(text), tries, reply.done.stats.total_s))
    print(f"\n{len(pairs)} unseen instructions, {args.tokens} tokens asked, AR forced; settings: {args.set}")
    print("| variant | on topic | repeated 3-grams | tries (mean) | checked drafts | median s |")
    print("|---|---|---|---|---|---|")
    for label, results in rows.items():
        checked = sum(tries > 1 for _, _, tries, _ in results)
        print(
            f"| {label} | {sum(r[0] for r in results)} of {len(results)} | "
            f"{statistics.mean(r[1] for r in results):.0%} | {statistics.mean(r[2] for r in results):.2f} | "
            f"{checked} drafted again | {statistics.median(r[3] for r in results):.2f} |"
        )


if __name__ == "__main__":
    main()
