"""How a run measures its adapter: the held-out loss and accuracy with a fixed mask draw, and the accuracy of
one pass a block (what the run ranks its adapters by on the unseen pairs)."""

from __future__ import annotations

import torch

from models.adapted import MASK_TOKEN_ID
from models.transformer import DiffusionTransformer
from training.adapt.loss import shifted_loss
from training.block_loss import block_causal_loss, one_pass_loss
from training.model import draw_masks

# Evaluated in batches of this many whatever the training batch, so that runs compare (a row's end-of-text
# padding to its batch's longest row is counted) and the unseen figure is bench/one_pass_accuracy.py's.
EVAL_BATCH = 8


@torch.no_grad()
def evaluate(
    model: DiffusionTransformer, held: list[tuple[torch.Tensor, torch.Tensor]], seed: int, block_length: int = 0
) -> tuple[float, float, float]:
    """Held-out loss and masked-token accuracy, with a fixed mask draw so evaluations compare; block-causal
    in blocks of `block_length` where it is set, and then also the accuracy with every answer block fully
    masked (what one pass a block commits from; NaN otherwise)."""
    model.eval()
    generator = torch.Generator().manual_seed(seed + 1)
    losses, right, total = [], 0, 0
    if block_length:
        for tokens, answer in held:
            result = block_causal_loss(model, tokens, answer, generator, block_length)
            losses.append(result.loss.item())
            right, total = right + result.correct, total + result.counted
        model.train()
        return sum(losses) / len(losses), right / max(1, total), one_pass_accuracy(model, held, block_length)
    for tokens, answer in held:
        losses.append(shifted_loss(model, tokens, answer, generator).item())
        draw = draw_masks(answer, torch.Generator().manual_seed(seed + 2))
        inputs = torch.where(draw.masked, torch.full_like(tokens, MASK_TOKEN_ID), tokens)
        device = model.embed.weight.device
        hidden, _ = model(inputs.to(device), torch.arange(tokens.shape[1], device=device))
        rows, positions = draw.learned[:, 1:].nonzero(as_tuple=True)
        guesses = model.logits(hidden[rows.to(device), positions.to(device)]).argmax(-1).cpu()
        right += int((guesses == tokens[rows, positions + 1]).sum())
        total += len(rows)
    model.train()
    return sum(losses) / len(losses), right / max(1, total), float("nan")


@torch.no_grad()
def one_pass_accuracy(
    model: DiffusionTransformer, held: list[tuple[torch.Tensor, torch.Tensor]], block_length: int
) -> float:
    """The share of answer tokens right with every answer block fully masked after clean blocks (what one pass
    a block commits from); NaN without pairs."""
    model.eval()
    right, total = 0, 0
    for tokens, answer in held:
        result = one_pass_loss(model, tokens, answer, block_length)
        right, total = right + result.correct, total + result.counted
    model.train()
    return right / total if total else float("nan")
