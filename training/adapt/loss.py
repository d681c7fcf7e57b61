"""The bidirectional training objective (block_loss.py has the block-causal one)."""

from __future__ import annotations

import torch
from torch.nn import functional as F

from models.adapted import MASK_TOKEN_ID
from models.transformer import DiffusionTransformer
from training.model import draw_masks


def shifted_loss(
    model: DiffusionTransformer,
    tokens: torch.Tensor,
    answer: torch.Tensor,
    generator: torch.Generator,
    *,
    block_share: float = 0.0,
) -> torch.Tensor:
    """The masked-diffusion bound with Dream's shift: position p is predicted on row p - 1. Logits are
    computed only for the learned rows (the vocabulary is 49152 wide)."""
    draw = draw_masks(answer, generator, block_share=block_share)
    inputs = torch.where(draw.masked, torch.full_like(tokens, MASK_TOKEN_ID), tokens)
    device = model.embed.weight.device
    hidden, _ = model(inputs.to(device), torch.arange(tokens.shape[1], device=device))
    rows, positions = draw.learned[:, 1:].nonzero(as_tuple=True)
    logits = model.logits(hidden[rows.to(device), positions.to(device)])  # row p - 1 for position p
    targets = tokens[rows, positions + 1].to(device)
    losses = F.cross_entropy(logits, targets, reduction="none")
    weights = 1.0 / (draw.t[rows, 0] * draw.denominator[rows])
    return (losses * weights.to(device)).sum() / tokens.shape[0]
