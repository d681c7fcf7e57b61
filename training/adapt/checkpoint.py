"""What an adapter run writes as it goes: the adapter GGUF (and a copy of its best), its log and curve, and a
checkpoint it resumes from."""

from __future__ import annotations

import csv
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from models.adapted import BlockDecoding, LoraPair, write_adapter
from training.adapt.lora import LoRALinear
from training.adapt.plan import AdaptPlan
from training.plot import plot_log
from training.selection import BEST_ADAPTER_NAME

ADAPTER_NAME = "sharpen-draft-lora.gguf"
CHECKPOINT_NAME = "checkpoint.pt"


def keep_if_best(adapter: Path, score: tuple[float, float], best: tuple[float, float]) -> tuple[float, float]:
    """Copy the adapter just written to BEST_ADAPTER_NAME beside it if its score (lower is better) is the run's
    best; the best score so far."""
    if not score < best:
        return best
    shutil.copyfile(adapter, adapter.parent / BEST_ADAPTER_NAME)
    return score


@dataclass
class Progress:
    """Where a run stands; saved with the LoRA so that a stopped run goes on where it was."""

    step: int = 0
    planned: int = 0  # the steps the cosine schedule spans (fitted to the budget after 10 steps)
    tokens_seen: int = 0
    train_loss: float = float("nan")
    minutes: float = 0.0
    rows: list[dict[str, float]] = field(default_factory=list)


def resume(
    plan: AdaptPlan, wrapped: dict[str, LoRALinear], optimizer: torch.optim.Optimizer, generator: torch.Generator
) -> Progress:
    checkpoint = read_checkpoint(plan.out, wrapped, optimizer)
    generator.set_state(checkpoint["generator"])
    return Progress(**checkpoint["progress"])


def read_checkpoint(folder: Path, wrapped: dict[str, LoRALinear], optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    """The checkpoint in `folder`, its LoRA and optimizer state already set into `wrapped` and `optimizer`."""
    checkpoint = torch.load(folder / CHECKPOINT_NAME, weights_only=False)
    with torch.no_grad():
        for name, (a, b) in checkpoint["lora"].items():
            wrapped[name].a.copy_(a)
            wrapped[name].b.copy_(b)
    optimizer.load_state_dict(checkpoint["optimizer"])
    return checkpoint


def write_checkpoint(
    folder: Path,
    wrapped: dict[str, LoRALinear],
    progress: Progress,
    optimizer: torch.optim.Optimizer,
    **extra: object,
) -> dict[str, LoraPair]:
    """A checkpoint to resume from (LoRA, optimizer, progress and `extra`) and the log, written in `folder`;
    the LoRA as arrays, for the adapter GGUF."""
    lora = {name: (w.a.detach().cpu().numpy().copy(), w.b.detach().cpu().numpy().copy()) for name, w in wrapped.items()}
    checkpoint = {
        "lora": {name: tuple(map(torch.from_numpy, pair)) for name, pair in lora.items()},
        "optimizer": optimizer.state_dict(),
        "progress": asdict(progress),
        **extra,
    }
    partial = folder / f"{CHECKPOINT_NAME}.partial"
    torch.save(checkpoint, partial)
    partial.replace(folder / CHECKPOINT_NAME)
    with (folder / "training_log.csv").open("w", newline="") as handle:
        # A run resumed from a checkpoint written before a column existed: its early rows leave it empty.
        columns = list(dict.fromkeys(key for row in progress.rows for key in row))
        writer = csv.DictWriter(handle, fieldnames=columns, restval="")
        writer.writeheader()
        writer.writerows(progress.rows)
    return lora


def log_row(
    step: int,
    tokens_seen: int,
    train_loss: float,
    heldout: float,
    accuracy: float,
    one_pass_accuracy: float,
    unseen_one_pass_accuracy: float,
    minutes: float,
) -> dict[str, float]:
    return {
        "step": step,
        "tokens_seen": tokens_seen,
        "train_loss": train_loss,
        "heldout_loss": heldout,
        "accuracy": accuracy,
        "one_pass_accuracy": one_pass_accuracy,
        "unseen_one_pass_accuracy": unseen_one_pass_accuracy,
        "minutes": minutes,
    }


def save(
    plan: AdaptPlan,
    wrapped: dict[str, LoRALinear],
    progress: Progress,
    optimizer: torch.optim.Optimizer,
    generator: torch.Generator,
) -> Path:
    """The adapter GGUF, its log and curve, and a checkpoint to resume from (LoRA, optimizer, progress)."""
    lora = write_checkpoint(plan.out, wrapped, progress, optimizer, generator=generator.get_state())
    title = "SmolLM2-135M adapted to " + ("block diffusion" if plan.block_lengths else "diffusion") + " (LoRA)"
    plot_log(plan.out / "training_log.csv", plan.out / "training_curve.svg", title)
    decoding = BlockDecoding(plan.block_lengths[0]) if plan.block_lengths else None
    return write_adapter(
        plan.out / ADAPTER_NAME, plan.base, lora, alpha=plan.alpha, name="sharpen-draft-lora", decoding=decoding
    )
