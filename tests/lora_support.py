"""LoRA pairs for the adapter tests: random, non-zero updates on a tiny base, a few training pairs, and a tiny
training plan. Import after `pytest.importorskip("torch")`."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from models import adapted
from models.transformer import DiffusionTransformer
from training.adapt.lora import add_lora
from training.adapt.plan import AdaptPlan

PAIRS = [
    ("Write a short note to a friend about the picnic.", "Hi Sam, the picnic is on Saturday at noon. Bring a hat!"),
    ("Write a two-line poem about rain.", "Rain on the window,\nsoft as a song."),
    ("Describe a lighthouse in one sentence.", "A white tower stands on the rocks and turns its light all night."),
] * 4


def random_lora(model: DiffusionTransformer, rank: int, seed: int = 0) -> dict[str, adapted.LoraPair]:
    """Non-zero A and B on every adapted matrix, rounded to float16 (what the adapter file stores)."""
    generator = torch.Generator().manual_seed(seed)
    wrapped = add_lora(model, rank, float(rank))
    lora = {}
    with torch.no_grad():
        for name, layer in wrapped.items():
            layer.a.copy_((torch.randn(layer.a.shape, generator=generator) * 0.3).half().float())
            layer.b.copy_((torch.randn(layer.b.shape, generator=generator) * 0.3).half().float())
            lora[name] = (layer.a.numpy().copy(), layer.b.numpy().copy())
    return lora


def write_pairs(path: Path) -> Path:
    """PAIRS as a training data file (one JSON record a line, as the teacher writes them)."""
    with path.open("w") as handle:
        for index, (instruction, draft) in enumerate(PAIRS):
            handle.write(json.dumps({"id": index, "text": instruction, "draft": draft}) + "\n")
    return path


def tiny_plan(base: Path, tmp_path: Path, **changes: Any) -> AdaptPlan:
    """Two steps of block training at rank 2 on a few pairs, evaluated after each."""
    plan = AdaptPlan(
        data=(write_pairs(tmp_path / "pairs.jsonl"),),
        out=tmp_path / "out",
        base=base,
        max_steps=2,
        rank=2,
        alpha=2.0,
        batch=4,
        eval_every=1,
        block_lengths=(4,),
    )
    return replace(plan, **changes)
