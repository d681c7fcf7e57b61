"""Train Sharpen's embedded diffusion model end to end; the shipped one in two stages (6 layers, then
grown to 12 and trained on; scripts/train-embedded-model runs both):

    .venv/bin/python -m training.train --out training/out/stage1 --minutes 65
    .venv/bin/python -m training.train --out training/out --minutes 60 \
        --init-from training/out/stage1/checkpoint.pt --layers 12 --peak-lr 1e-3 --warmup 20

1. a 4096-token byte-level BPE on the instructions and drafts; 2. sequences of <|user|> instruction
<|assistant|> draft and end-of-text padding, each batch cut to a random length; 3. LLaDA's masked-diffusion fine-tuning
loss on the answer only, AdamW with warm-up and cosine decay, a held-out loss every `eval_every` steps,
within a wall-clock budget; 4. export to GGUF (Q8_0) in Sharpen's cacheable form.

Writes tokenizer.json, training_log.csv, training_curve.svg, checkpoint.pt, the GGUF and the same
weights as a LLaDA checkpoint folder (sharpen-draft-hf/, for the torch backend) into --out. The model is
the torch backend's own module (models/transformer.py). Needs the `torch` extra.
"""

from __future__ import annotations

import argparse
import csv
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from models.transformer import DiffusionTransformer
from training.data import encode, is_held_out, load_pairs
from training.export import export_checkpoint, export_gguf
from training.loop import cosine_rate, count_to_str, descend, spent
from training.model import (
    ModelShape,
    build_model,
    deepened,
    from_interleaved_layout,
    masked_diffusion_loss,
    parameter_count,
)
from training.plot import plot_log
from training.tokenizer import special_ids, train_tokenizer

GGUF_NAME = "sharpen-draft-q8_0.gguf"
CHECKPOINT_FOLDER = "sharpen-draft-hf"


@dataclass(frozen=True)
class TrainingPlan:
    data: Path | tuple[Path, ...]  # one file of pairs, or several read as one
    out: Path
    minutes: float = 65.0
    max_steps: int | None = None
    length: int = 320
    # Each batch is cut to a length drawn from [min_length, length]: drafts are asked for at many lengths,
    # and a model that only ever saw full-length sequences learns that end-of-text lies near the end.
    min_length: int = 96
    # Share of rows trained in the state that block-wise (semi-autoregressive) decoding meets.
    block_share: float = 0.25
    batch: int = 16
    peak_lr: float = 2e-3
    warmup: int = 60
    eval_every: int = 50
    vocab_size: int = 4096
    shape: ModelShape = field(default_factory=ModelShape)
    seed: int = 0
    q8: bool = True
    init_from: Path | None = None  # continue training from this checkpoint.pt (same data and tokenizer)


@dataclass(frozen=True)
class TrainingReport:
    steps: int
    tokens_seen: int
    train_loss: float
    heldout_loss: float
    minutes: float
    parameters: int
    gguf: Path


def run(plan: TrainingPlan, log: Callable[[str], object] = print) -> TrainingReport:
    torch.manual_seed(plan.seed)
    pairs = [p for path in ((plan.data,) if isinstance(plan.data, Path) else plan.data) for p in load_pairs(path)]
    train_pairs = [p for p in pairs if not is_held_out(p)]
    held_out = [p for p in pairs if is_held_out(p)] or train_pairs[:1]
    tokenizer = train_tokenizer(
        (text for p in train_pairs for text in (p.instruction, p.draft)), vocab_size=plan.vocab_size
    )
    plan.out.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(plan.out / "tokenizer.json"))
    ids = special_ids(tokenizer)
    shape = ModelShape(**{**asdict(plan.shape), "vocab_size": tokenizer.get_vocab_size()})

    def tensors(subset: list) -> tuple[torch.Tensor, torch.Tensor]:
        encoded = [encode(tokenizer, p, plan.length, ids) for p in subset]
        tokens = torch.tensor([e.tokens for e in encoded])
        positions = torch.arange(plan.length)[None, :]
        answer = positions >= torch.tensor([e.answer_start for e in encoded])[:, None]
        return tokens, answer

    train_tokens, train_answer = tensors(train_pairs)
    held_tokens, held_answer = tensors(held_out[:64])
    model = build_model(shape, ids.mask, ids.eos)
    if plan.init_from is not None:
        model.load_state_dict(load_state(plan.init_from, shape))
        log(f"continuing from {plan.init_from}")
    log(
        f"{len(train_pairs)} training pairs, {len(held_out)} held out; vocabulary {shape.vocab_size}; "
        f"{count_to_str(parameter_count(model))} parameters"
    )
    optimizer = torch.optim.AdamW(model.parameters(), lr=plan.peak_lr, betas=(0.9, 0.95), weight_decay=0.1)
    generator = torch.Generator().manual_seed(plan.seed)
    started = time.perf_counter()
    budget_s = plan.minutes * 60
    planned_steps = plan.max_steps or 10_000
    step = tokens_seen = 0
    train_loss = heldout = float("nan")
    rows: list[dict[str, float]] = []
    while True:
        elapsed = time.perf_counter() - started
        if spent(plan, step, elapsed):
            break
        if step == 10 and plan.max_steps is None:  # now the speed is known: fit the schedule to the budget
            planned_steps = max(20, int(budget_s / (elapsed / step)))
        batch = torch.randint(0, len(train_tokens), (plan.batch,), generator=generator)
        cut = canvas_cut(plan, generator)
        loss = masked_diffusion_loss(
            model,
            train_tokens[batch, :cut],
            train_answer[batch, :cut],
            ids.mask,
            generator,
            block_share=plan.block_share,
        )
        descend(optimizer, loss, model.parameters(), cosine_rate(step, planned_steps, plan.peak_lr, plan.warmup))
        step += 1
        tokens_seen += plan.batch * cut
        train_loss = loss.item() if train_loss != train_loss else 0.9 * train_loss + 0.1 * loss.item()
        if step % plan.eval_every == 0 or step == 1:
            heldout = evaluate(model, held_tokens, held_answer, ids.mask, plan.seed)
            rows.append(
                {
                    "step": step,
                    "tokens_seen": tokens_seen,
                    "train_loss": train_loss,
                    "heldout_loss": heldout,
                    "minutes": (time.perf_counter() - started) / 60,
                }
            )
            log(
                f"step {step:5d}  tokens {count_to_str(tokens_seen):>6}  train {train_loss:.3f}  held-out {heldout:.3f}"
            )
    heldout = evaluate(model, held_tokens, held_answer, ids.mask, plan.seed)
    minutes = (time.perf_counter() - started) / 60
    rows.append(
        {
            "step": step,
            "tokens_seen": tokens_seen,
            "train_loss": train_loss,
            "heldout_loss": heldout,
            "minutes": minutes,
        }
    )
    torch.save({"shape": asdict(shape), "layout": "hf", "state": model.state_dict()}, plan.out / "checkpoint.pt")
    earlier = read_log(plan.init_from.parent / "training_log.csv") if plan.init_from is not None else []
    write_log(plan.out / "training_log.csv", continued_log(earlier, rows))
    plot_log(plan.out / "training_log.csv", plan.out / "training_curve.svg", "Sharpen's embedded diffusion model")
    state = {name: tensor.detach().float().numpy() for name, tensor in model.state_dict().items()}
    gguf = export_gguf(state, shape, tokenizer, plan.out / GGUF_NAME, q8=plan.q8, name="sharpen-draft")
    export_checkpoint(state, model.spec, tokenizer, plan.out / CHECKPOINT_FOLDER)
    return TrainingReport(step, tokens_seen, train_loss, heldout, minutes, parameter_count(model), gguf)


def read_log(path: Path) -> list[dict[str, float]]:
    if not path.is_file():
        return []
    with path.open() as handle:
        return [{key: float(value) for key, value in row.items()} for row in csv.DictReader(handle)]


def write_log(path: Path, rows: list[dict[str, float]]) -> None:
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(
            {key: int(value) if float(value).is_integer() else value for key, value in row.items()} for row in rows
        )


def continued_log(earlier: list[dict[str, float]], rows: list[dict[str, float]]) -> list[dict[str, float]]:
    """This run's log after the log of the run it continued: steps, tokens and minutes count on, and
    each row says which stage of training it belongs to, so the curve covers the model's whole history."""
    last = earlier[-1] if earlier else {}
    stage = last.get("stage", 1.0) + 1 if earlier else 1.0
    offsets = {key: last.get(key, 0.0) for key in ("step", "tokens_seen", "minutes")}
    history = [{**row, "stage": row.get("stage", 1.0)} for row in earlier]
    now = [{**row, **{key: row[key] + offset for key, offset in offsets.items()}, "stage": stage} for row in rows]
    return history + now


def canvas_cut(plan: TrainingPlan, generator: torch.Generator) -> int:
    """This batch's sequence length: uniform in [min_length, length], a multiple of 8."""
    low = min(plan.min_length, plan.length)
    drawn = int(torch.randint(low, plan.length + 1, (1,), generator=generator))
    return max(low, min(plan.length, drawn // 8 * 8))


def saved_layers(checkpoint: Path | None) -> int:
    """The layer count of the model in `checkpoint`, or the default shape's without one."""
    if checkpoint is None:
        return ModelShape.layers
    return int(torch.load(checkpoint, map_location="cpu", weights_only=True)["shape"]["layers"])


def load_state(path: Path, shape: ModelShape) -> dict[str, torch.Tensor]:
    """A checkpoint's weights for a model of `shape`: the same shape, or the same with more layers (grown)."""
    saved = torch.load(path, map_location="cpu", weights_only=True)
    saved_shape = saved.get("shape") or {}
    shallower = {**saved_shape, "layers": shape.layers} == asdict(shape) and saved_shape["layers"] < shape.layers
    if saved_shape != asdict(shape) and not shallower:
        raise ValueError(f"{path} holds a model of shape {saved_shape}, not {asdict(shape)}")
    state = saved["state"]
    state = state if saved.get("layout") == "hf" else from_interleaved_layout(state, shape.heads)
    return deepened(state, saved_shape["layers"], shape.layers) if shallower else state


@torch.no_grad()
def evaluate(model: DiffusionTransformer, tokens: torch.Tensor, answer: torch.Tensor, mask_id: int, seed: int) -> float:
    """Held-out loss with a fixed mask draw, so successive evaluations are comparable."""
    model.eval()
    generator = torch.Generator().manual_seed(seed + 1)
    losses = [masked_diffusion_loss(model, tokens, answer, mask_id, generator).item() for _ in range(2)]
    model.train()
    return sum(losses) / len(losses)


def main() -> None:
    parser = argparse.ArgumentParser(description="Train Sharpen's embedded diffusion model")
    parser.add_argument(
        "--data", type=Path, nargs="+", default=[Path("training/data/drafts.jsonl")], help="files of pairs"
    )
    parser.add_argument("--out", type=Path, default=Path("training/out"))
    parser.add_argument("--minutes", type=float, default=65.0)
    parser.add_argument("--steps", type=int, default=None, help="stop after this many steps (tests)")
    parser.add_argument("--init-from", type=Path, default=None, help="continue from a checkpoint.pt")
    parser.add_argument("--peak-lr", type=float, default=2e-3)
    parser.add_argument("--warmup", type=int, default=60)
    parser.add_argument("--block-share", type=float, default=TrainingPlan.block_share)
    parser.add_argument(
        "--layers", type=int, default=None, help="layers (default: --init-from's, else 6); more than its: grow it"
    )
    args = parser.parse_args()
    torch.set_num_threads(max(1, torch.get_num_threads()))
    plan = TrainingPlan(
        data=tuple(args.data),
        out=args.out,
        minutes=args.minutes,
        max_steps=args.steps,
        init_from=args.init_from,
        peak_lr=args.peak_lr,
        warmup=args.warmup,
        block_share=args.block_share,
        shape=ModelShape(layers=args.layers or saved_layers(args.init_from)),
    )
    report = run(plan)
    print(report)


if __name__ == "__main__":
    main()
