"""The block-causal training objective (Fast-dLLM v2, SDAR): a model that attends bidirectionally inside an
aligned block and causally across blocks, trained exactly as the llama.cpp backend's block cache decodes it.

Each row is laid out twice in one sequence (two streams): the clean tokens, attending block-causally among
themselves (what a settled block's clean pass computes), then a noisy copy of the blocks that hold the
answer, whose masked positions are learned. A noisy block attends to the clean blocks before it and to
itself, never to another noisy block: the state of the one block a pass refines, with everything before it
settled. Blocks are aligned at absolute positions, prompt included, as the engine aligns them.

With Dream's shift, position p is predicted on row p - 1. For the first position of a block that row is the
previous block's last clean row (in the engine, the settled block's clean pass); for the others it is the
noisy block's own row. Every row is drawn twice with complementary masks (Fast-dLLM v2), so each answer
token is learned once per step and every mask ratio is seen with its complement; the two noisy copies
share one clean stream (three streams in one sequence), which saves computing the prompt twice.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.nn import functional as F

from models.adapted import MASK_TOKEN_ID
from models.transformer import DiffusionTransformer


@dataclass(frozen=True)
class BlockLoss:
    loss: torch.Tensor  # mean cross-entropy over the learned positions
    correct: int  # learned positions whose argmax is the target
    counted: int  # learned positions


def two_stream_mask(length: int, noisy_from: int, block_length: int, copies: int = 1) -> torch.Tensor:
    """Attention for the clean stream (positions 0..length-1) followed by `copies` noisy ones (each
    noisy_from..length-1): True where a query (row) may attend to a key (column). A noisy copy never sees
    another."""
    clean = torch.arange(length) // block_length
    noisy = torch.arange(noisy_from, length) // block_length
    width = len(noisy)
    mask = torch.zeros(length + copies * width, length + copies * width, dtype=torch.bool)
    mask[:length, :length] = clean[None, :] <= clean[:, None]
    for copy in range(copies):
        rows = slice(length + copy * width, length + (copy + 1) * width)
        mask[rows, :length] = clean[None, :] < noisy[:, None]
        mask[rows, rows] = noisy[None, :] == noisy[:, None]
    return mask


def complementary_masks(answer: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """(2, batch, n): each row's answer masked with probability t ~ U(0, 1), and the complementary mask (every
    answer position masked in exactly one of the two)."""
    t = torch.rand(answer.shape[0], 1, generator=generator)
    noise = torch.rand(answer.shape, generator=generator) < t
    return torch.stack((noise & answer, ~noise & answer))


def training_masks(answer: torch.Tensor, generator: torch.Generator, whole_share: float = 0.0) -> torch.Tensor:
    """(2, batch, n): complementary masks, except that each row is drawn with probability `whole_share` with its
    whole answer masked in the first copy (every block then in the state a block decoded in one pass starts
    from) and the random draw moved to the second copy, whose complement would hold nothing to learn."""
    masks = complementary_masks(answer, generator)
    if whole_share <= 0:
        return masks
    whole = torch.rand(answer.shape[0], generator=generator) < whole_share
    drawn = masks[0].clone()
    masks[0][whole] = answer[whole]
    masks[1][whole] = drawn[whole]
    return masks


def block_causal_logits(
    model: DiffusionTransformer, clean: torch.Tensor, masked: torch.Tensor, block_length: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """The logits for every masked position of `clean` (batch, n) under each mask of `masked` (copies,
    batch, n), each on the row the block cache predicts it from (module docstring), and the targets. The
    copies share one clean stream."""
    copies, _, length = masked.shape
    any_masked = masked.any(dim=2)
    firsts = masked.float().argmax(dim=2)[any_masked]
    first_masked = int(firsts.min()) if len(firsts) else 0
    noisy_from = first_masked - first_masked % block_length
    width = length - noisy_from
    shown = torch.where(masked, torch.full_like(masked, MASK_TOKEN_ID, dtype=clean.dtype), clean[None])
    streams = [clean, *(shown[copy, :, noisy_from:] for copy in range(copies))]
    positions = torch.cat((torch.arange(length), *(torch.arange(noisy_from, length) for _ in range(copies))))
    attention = two_stream_mask(length, noisy_from, block_length, copies)
    # The layout is drawn on the CPU (the masks' generator lives there); the model runs where its weights are.
    device = model.embed.weight.device
    hidden, _ = model(torch.cat(streams, dim=1).to(device), positions.to(device), mask=attention.to(device))
    copy, rows, learned = masked.nonzero(as_tuple=True)
    predicted_on = learned - 1
    opens_block = learned % block_length == 0
    # A block's first position sits on the clean stream's previous row; the others on their noisy copy's.
    column = torch.where(opens_block, predicted_on, length + copy * width + predicted_on - noisy_from)
    logits = model.logits(hidden[rows.to(device), column.to(device)]).float()
    return logits, clean[rows, learned].to(device)


def block_causal_loss(
    model: DiffusionTransformer,
    tokens: torch.Tensor,
    answer: torch.Tensor,
    generator: torch.Generator,
    block_length: int,
    entropy_weight: float = 0.0,
    whole_share: float = 0.0,
) -> BlockLoss:
    """Cross-entropy on every masked answer position of both complementary draws. With `entropy_weight`,
        plus that much of the mean entropy of the positions the model already gets right (dParallel's
        certainty forcing: the targets are the base's own greedy drafts, so it is pushed to be sure of what it
        would write anyway, which is what lets a pass settle several positions at a threshold). With `whole_share`,
    that share of rows is learned fully masked (`training_masks`)."""
    masks = training_masks(answer, generator, whole_share)
    logits, targets = block_causal_logits(model, tokens, masks, block_length)
    loss = F.cross_entropy(logits, targets)
    right = logits.argmax(-1) == targets
    if entropy_weight > 0 and bool(right.any()):
        log_probabilities = F.log_softmax(logits[right], dim=-1)
        entropy = -(log_probabilities.exp() * log_probabilities).sum(-1).mean()
        loss = loss + entropy_weight * entropy
    return BlockLoss(loss, int(right.sum()), len(targets))


def one_pass_loss(
    model: DiffusionTransformer, tokens: torch.Tensor, answer: torch.Tensor, block_length: int
) -> BlockLoss:
    """Every answer block fully masked after clean blocks: what a block decoded in one pass is committed from."""
    logits, targets = block_causal_logits(model, tokens, answer[None], block_length)
    right = logits.argmax(-1) == targets
    return BlockLoss(F.cross_entropy(logits, targets), int(right.sum()), len(targets))
