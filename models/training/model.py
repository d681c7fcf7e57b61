"""The embedded diffusion model for training: the torch backend's own LLaDA module at a small size.

It is `models.transformer.DiffusionTransformer` with a LLaDA spec (bidirectional, predictions in place,
tied output), so the weights trained here are served unchanged by the torch backend (as a LLaDA
checkpoint folder) and, with q and k rows permuted into ggml's rope layout, by llama.cpp (as Sharpen's
cacheable `llama` GGUF).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from models.hf_checkpoint import TransformerSpec
from models.layouts import hf_rope_rows
from models.transformer import DiffusionTransformer


@dataclass(frozen=True)
class ModelShape:
    vocab_size: int = 4096
    width: int = 256
    layers: int = 6
    heads: int = 4
    ffn: int = 704  # a multiple of 32, so Q8_0 can store every matrix
    rope_base: float = 10000.0
    norm_eps: float = 1e-5
    max_positions: int = 512

    @property
    def head_dim(self) -> int:
        return self.width // self.heads

    def spec(self, mask_token_id: int, eos_token_id: int) -> TransformerSpec:
        return TransformerSpec(
            architecture="llada",
            vocab_size=self.vocab_size,
            width=self.width,
            layers=self.layers,
            heads=self.heads,
            kv_heads=self.heads,
            ffn=self.ffn,
            rope_theta=self.rope_base,
            norm_eps=self.norm_eps,
            qkv_bias=False,
            tied_output=True,
            shift_logits=False,
            mask_token_id=mask_token_id,
            context_length=self.max_positions,
            eos_token_ids=(eos_token_id,),
        )


def build_model(shape: ModelShape, mask_token_id: int, eos_token_id: int) -> DiffusionTransformer:
    model = DiffusionTransformer(shape.spec(mask_token_id, eos_token_id))
    model.apply(_init)
    return model


def _init(module: nn.Module) -> None:
    # Small initialisation: the naive probe with std 1 embeddings never learned.
    if isinstance(module, nn.Linear | nn.Embedding):
        nn.init.normal_(module.weight, std=0.02)


def all_logits(model: DiffusionTransformer, tokens: torch.Tensor) -> torch.Tensor:
    hidden, _ = model(tokens, torch.arange(tokens.shape[1], device=tokens.device))
    return model.logits(hidden)


def parameter_count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def masked_diffusion_loss(
    model: DiffusionTransformer, tokens: torch.Tensor, answer: torch.Tensor, mask_id: int, generator: torch.Generator
) -> torch.Tensor:
    """LLaDA's fine-tuning loss: mask each answer position with probability t ~ U(0, 1) (the prompt never),
    cross-entropy on the masked positions weighted by 1/t, averaged over the answer's length."""
    batch = tokens.shape[0]
    t = torch.rand(batch, 1, generator=generator).clamp_min(1e-3)
    masked = (torch.rand(tokens.shape, generator=generator) < t) & answer
    inputs = torch.where(masked, torch.full_like(tokens, mask_id), tokens)
    logits = all_logits(model, inputs)
    losses = F.cross_entropy(logits.transpose(1, 2), tokens, reduction="none")
    weighted = (losses * masked / t).sum(dim=1) / answer.sum(dim=1).clamp_min(1)
    return weighted.mean()


def from_interleaved_layout(state: dict[str, torch.Tensor], heads: int) -> dict[str, torch.Tensor]:
    """A checkpoint of the first embedded model (its own module, rotary pairs interleaved as ggml's) in
    this module's names and Hugging Face rotary layout, so training can continue from it."""
    names = {"q": "attention.q", "k": "attention.k", "v": "attention.v", "o": "attention.o"}
    converted: dict[str, torch.Tensor] = {}
    for name, tensor in state.items():
        parts = name.split(".")
        if parts[0] == "blocks" and parts[2] in names:
            if parts[2] in ("q", "k"):
                tensor = hf_rope_rows(tensor, heads)
            name = ".".join([*parts[:2], names[parts[2]], *parts[3:]])
        converted[name] = tensor.contiguous()
    return converted


def count_to_str(count: int) -> str:
    return f"{count / 1e6:.1f}M" if count >= 1e6 else f"{count / 1e3:.0f}K"


def cosine_rate(step: int, total: int, peak: float, warmup: int) -> float:
    if step < warmup:
        return peak * (step + 1) / warmup
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))
