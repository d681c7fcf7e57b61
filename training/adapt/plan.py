"""What an adapter training run is told (`python -m training.adapt`'s flags set it)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class AdaptPlan:
    data: tuple[Path, ...]
    out: Path
    base: Path
    minutes: float = 60.0
    max_steps: int | None = None
    rank: int = 32
    alpha: float = 32.0
    batch: int = 8
    peak_lr: float = 1e-3
    warmup: int = 30
    eval_every: int = 60
    # End-of-text padding after the answer, up to this many tokens (drawn per batch), learned as padding.
    max_padding: int = 32
    max_answer: int = 200
    block_share: float = 0.25
    # Block-causal training (block_loss.py) with these aligned block lengths, one drawn per step; the first
    # is the one the adapter names for decoding. Empty: bidirectional, as the shipped adapter was trained.
    block_lengths: tuple[int, ...] = ()
    # Block-causal only: certainty forcing, this much of the entropy of positions already right (block_loss.py).
    entropy_weight: float = 0.0
    # Block-causal only: this share of rows learned with every answer block fully masked (one-pass decoding).
    whole_block_share: float = 0.0
    bf16: bool = False  # bfloat16 autocast: faster with AMX or AVX512_BF16 here; measure on other CPUs
    device: str = "cpu"  # where the model trains ("cuda" on a GPU machine); the masks are drawn on the CPU
    # Pairs already encoded by `write_examples`, so that a machine without llama.cpp (a GPU one) can train.
    examples: Path | None = None
    # Instructions of kinds never trained on with AR's drafts, verbatim (bench/unseen_drafts.py): their one-pass
    # accuracy is logged at each evaluation and chooses the best adapter (block-causal runs).
    unseen: Path | None = None
    resume: bool = False  # go on from the checkpoint in `out` (its LoRA, optimizer, schedule and log)
    # This share of the training pairs are writing cases (training/adapt/writing.py: facts and stances asked,
    # laid out as the drafter serves drafts into a document); the rest the files' pairs.
    writing_share: float = 0.0
    init_from: Path | None = None  # start from this adapter's LoRA (same base, rank at most this), not from zero
    seed: int = 0
