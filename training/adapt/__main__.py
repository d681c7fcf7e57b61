"""`python -m training.adapt`: adapt SmolLM2-135M-Instruct into Sharpen's diffusion drafter (the package's
docstring), or encode the pairs for a machine without llama.cpp (--write-examples)."""

from __future__ import annotations

import argparse
from pathlib import Path

from training.adapt.examples import encode_data, write_examples
from training.adapt.plan import AdaptPlan
from training.adapt.run import run


def main() -> None:
    from models.catalogue import builtin_catalogue, embedded_file

    parser = argparse.ArgumentParser(description="Adapt SmolLM2-135M-Instruct into Sharpen's diffusion drafter (LoRA)")
    parser.add_argument(
        "--data",
        type=Path,
        nargs="+",
        default=[Path("training/data/drafts.jsonl"), Path("training/data/drafts-open.jsonl")],
    )
    parser.add_argument("--out", type=Path, default=Path("training/out-lora"))
    parser.add_argument("--base", type=Path, default=None, help="the base GGUF (default: the embedded AR model)")
    parser.add_argument("--minutes", type=float, default=AdaptPlan.minutes)
    parser.add_argument("--steps", type=int, default=None, help="stop after this many steps (tests)")
    parser.add_argument("--rank", type=int, default=AdaptPlan.rank)
    parser.add_argument("--peak-lr", type=float, default=AdaptPlan.peak_lr)
    parser.add_argument(
        "--block-lengths",
        type=lambda text: tuple(int(n) for n in text.split(",")),
        default=(),
        help="train block-causally with these block lengths, e.g. 8 or 4,8,16 (the first is the default)",
    )
    parser.add_argument(
        "--entropy-weight",
        type=float,
        default=AdaptPlan.entropy_weight,
        help="certainty forcing: this much of the entropy of masked positions already predicted right",
    )
    parser.add_argument(
        "--whole-block-share",
        type=float,
        default=AdaptPlan.whole_block_share,
        help="this share of rows learned with every answer block fully masked (what one pass a block decodes)",
    )
    parser.add_argument(
        "--writing-share",
        type=float,
        default=AdaptPlan.writing_share,
        help="this share of the training pairs are writing cases (facts and stances asked, into a document)",
    )
    parser.add_argument("--bf16", action="store_true", help="bfloat16 autocast (faster with AMX or AVX512_BF16)")
    parser.add_argument("--device", default=AdaptPlan.device, help="where to train: cpu (default) or cuda")
    parser.add_argument(
        "--examples", type=Path, default=None, help="train on pairs encoded by --write-examples (no llama.cpp needed)"
    )
    parser.add_argument(
        "--write-examples", type=Path, default=None, help="encode --data for --examples into this file, and stop"
    )
    parser.add_argument(
        "--unseen",
        type=Path,
        default=None,
        help="AR's drafts of unseen instructions (bench/unseen_drafts.py): scored each evaluation; choose the best",
    )
    parser.add_argument("--resume", action="store_true", help="go on from the checkpoint in --out")
    parser.add_argument(
        "--init-from", type=Path, default=None, help="start from this adapter's LoRA (the same rank or a lower one)"
    )
    parser.add_argument("--batch", type=int, default=AdaptPlan.batch)
    parser.add_argument("--eval-every", type=int, default=AdaptPlan.eval_every)
    args = parser.parse_args()
    base = args.base or embedded_file(builtin_catalogue()["smollm2-135m-instruct"].source)
    if args.write_examples is not None:
        encoded = encode_data(tuple(args.data), base, AdaptPlan.max_answer, args.unseen, args.writing_share)
        print(
            f"{len(encoded.train)} training, {len(encoded.held)} held-out and {len(encoded.unseen)} unseen pairs: ",
            end="",
        )
        print(write_examples(encoded, args.write_examples))
        return
    plan = AdaptPlan(
        data=tuple(args.data),
        out=args.out,
        base=base,
        minutes=args.minutes,
        max_steps=args.steps,
        rank=args.rank,
        alpha=float(args.rank),
        peak_lr=args.peak_lr,
        block_lengths=args.block_lengths,
        entropy_weight=args.entropy_weight,
        whole_block_share=args.whole_block_share,
        writing_share=args.writing_share,
        bf16=args.bf16,
        device=args.device,
        examples=args.examples,
        unseen=args.unseen,
        resume=args.resume,
        init_from=args.init_from,
        batch=args.batch,
        eval_every=args.eval_every,
    )
    print(run(plan))


if __name__ == "__main__":
    main()
