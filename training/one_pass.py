"""How much of a block decoded in one pass is right, and which part: the evidence for what bounds a
one-pass block's speed at a given quality.

Every answer block is fully masked after clean blocks (block_loss.one_pass_loss's state). The tally counts
the positions whose argmax is the target by their offset in the block (0: the block's first position,
predicted from the previous block's last clean row, as AR predicts it) and by their confidence rank in
their block (0: the block's most confident position), and the positions at or above each threshold (what
a threshold sampler, Fast-dLLM's, would commit from that pass).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from models.transformer import DiffusionTransformer
from training.block_loss import block_causal_logits

THRESHOLDS = (0.9, 0.7, 0.5, 0.3)


@dataclass
class OnePassTally:
    block_length: int
    right_at: list[int] = field(default_factory=list)  # by offset in the block
    counted_at: list[int] = field(default_factory=list)
    right_by_rank: list[int] = field(default_factory=list)  # by confidence rank in the block
    counted_by_rank: list[int] = field(default_factory=list)
    blocks: int = 0
    # At each of THRESHOLDS: the positions whose top probability reaches it, and how many of those are right.
    confident: list[int] = field(default_factory=lambda: [0] * len(THRESHOLDS))
    confident_right: list[int] = field(default_factory=lambda: [0] * len(THRESHOLDS))

    def __post_init__(self) -> None:
        for counts in (self.right_at, self.counted_at, self.right_by_rank, self.counted_by_rank):
            counts.extend([0] * (self.block_length - len(counts)))

    def accuracy_at(self, offset: int) -> float:
        return self.right_at[offset] / max(1, self.counted_at[offset])

    def accuracy_of_rank(self, rank: int) -> float:
        return self.right_by_rank[rank] / max(1, self.counted_by_rank[rank])

    def per_block(self, positions: int) -> float:
        """`positions` of all those counted, as so many of a whole block's (the first answer block of a row
        starts where its prompt ends, so it may be short)."""
        return self.block_length * positions / max(1, sum(self.counted_at))


@torch.no_grad()
def tally_one_pass(
    model: DiffusionTransformer, tokens: torch.Tensor, answer: torch.Tensor, tally: OnePassTally
) -> OnePassTally:
    """Add one batch's one-pass blocks (tokens and answer (batch, n), as adapt.collate builds them) to `tally`."""
    length = tally.block_length
    logits, targets = block_causal_logits(model, tokens, answer[None], length)
    # block_causal_logits orders the positions as nonzero() does: by row, then position.
    rows, learned = answer.nonzero(as_tuple=True)
    probabilities = torch.softmax(logits, dim=-1)
    confidence, guesses = probabilities.max(dim=-1)
    right = guesses == targets
    offsets = learned % length
    for offset in range(length):
        here = offsets == offset
        tally.right_at[offset] += int(right[here].sum())
        tally.counted_at[offset] += int(here.sum())
    block = rows * (tokens.shape[1] // length + 1) + learned // length
    # Within a block (ascending ids), most confident first.
    order = torch.argsort(block.double() * 2.0 - confidence.double())
    block, right = block[order], right[order]
    _, sizes = torch.unique_consecutive(block, return_counts=True)
    starts = torch.repeat_interleave(torch.cumsum(sizes, 0) - sizes, sizes)
    ranks = torch.arange(len(block)) - starts
    for rank in range(length):
        here = ranks == rank
        tally.right_by_rank[rank] += int(right[here].sum())
        tally.counted_by_rank[rank] += int(here.sum())
    tally.blocks += len(sizes)
    for index, threshold in enumerate(THRESHOLDS):
        sure = confidence >= threshold
        tally.confident[index] += int(sure.sum())
        tally.confident_right[index] += int((sure & (guesses == targets)).sum())
    return tally
