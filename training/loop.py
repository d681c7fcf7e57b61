"""What both training loops share (adapt/run.py's LoRA on SmolLM2, train.py's model from scratch): when a run
stops, the learning-rate schedule, one optimizer step, and how their logs count."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Protocol

import torch


class Budget(Protocol):
    """A run's budget, as both plans (AdaptPlan, TrainingPlan) declare it."""

    @property
    def minutes(self) -> float: ...

    @property
    def max_steps(self) -> int | None: ...


def spent(budget: Budget, step: int, elapsed_s: float) -> bool:
    """Whether a run stops: its steps taken (where it counts them) or its minutes gone."""
    return (budget.max_steps is not None and step >= budget.max_steps) or elapsed_s > budget.minutes * 60


def cosine_rate(step: int, total: int, peak: float, warmup: int) -> float:
    """Linear warm-up to `peak`, then a cosine decay to a tenth of it at step `total`."""
    if step < warmup:
        return peak * (step + 1) / warmup
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


def descend(
    optimizer: torch.optim.Optimizer, loss: torch.Tensor, parameters: Iterable[torch.nn.Parameter], rate: float
) -> None:
    """One optimizer step at learning rate `rate` down `loss`'s gradient, clipped to norm 1."""
    for group in optimizer.param_groups:
        group["lr"] = rate
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(parameters, 1.0)
    optimizer.step()


def count_to_str(count: int) -> str:
    return f"{count / 1e6:.1f}M" if count >= 1e6 else f"{count / 1e3:.0f}K"
