"""The embedded diffusion model in torch: a small bidirectional LLaMA-style transformer.

It is laid out exactly as llama.cpp's `llama` architecture computes (RMSNorm, rotary embeddings on
interleaved pairs, as ggml's "normal" rope mode, SwiGLU, tied output), without a causal mask, so the
weights export to GGUF unchanged and llama.cpp serves them with `attention.causal = false`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F


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


class RMSNorm(nn.Module):
    def __init__(self, width: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(width))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotary_tables(shape: ModelShape, positions: int) -> tuple[torch.Tensor, torch.Tensor]:
    inverse = 1.0 / (shape.rope_base ** (torch.arange(0, shape.head_dim, 2).float() / shape.head_dim))
    angles = torch.outer(torch.arange(positions).float(), inverse)
    return angles.cos(), angles.sin()


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate interleaved pairs (x0, x1), (x2, x3), ... as ggml's normal rope mode does."""
    even, odd = x[..., 0::2], x[..., 1::2]
    rotated = torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1)
    return rotated.flatten(-2)


class Block(nn.Module):
    def __init__(self, shape: ModelShape) -> None:
        super().__init__()
        self.shape = shape
        self.attn_norm = RMSNorm(shape.width, shape.norm_eps)
        self.q = nn.Linear(shape.width, shape.width, bias=False)
        self.k = nn.Linear(shape.width, shape.width, bias=False)
        self.v = nn.Linear(shape.width, shape.width, bias=False)
        self.o = nn.Linear(shape.width, shape.width, bias=False)
        self.ffn_norm = RMSNorm(shape.width, shape.norm_eps)
        self.gate = nn.Linear(shape.width, shape.ffn, bias=False)
        self.up = nn.Linear(shape.width, shape.ffn, bias=False)
        self.down = nn.Linear(shape.ffn, shape.width, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        batch, length, _ = x.shape
        h = self.attn_norm(x)
        split = (batch, length, self.shape.heads, self.shape.head_dim)
        q = rotate(self.q(h).view(split), cos, sin).transpose(1, 2)
        k = rotate(self.k(h).view(split), cos, sin).transpose(1, 2)
        v = self.v(h).view(split).transpose(1, 2)
        attended = F.scaled_dot_product_attention(q, k, v, is_causal=False)
        x = x + self.o(attended.transpose(1, 2).reshape(batch, length, -1))
        h = self.ffn_norm(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class DiffusionLM(nn.Module):
    def __init__(self, shape: ModelShape) -> None:
        super().__init__()
        self.shape = shape
        self.embed = nn.Embedding(shape.vocab_size, shape.width)
        self.blocks = nn.ModuleList(Block(shape) for _ in range(shape.layers))
        self.norm = RMSNorm(shape.width, shape.norm_eps)
        cos, sin = rotary_tables(shape, shape.max_positions)
        self.register_buffer("cos", cos[:, None, :], persistent=False)
        self.register_buffer("sin", sin[:, None, :], persistent=False)
        self.apply(self._init)

    @staticmethod
    def _init(module: nn.Module) -> None:
        # Small initialisation: the naive probe with std 1 embeddings never learned.
        if isinstance(module, nn.Linear | nn.Embedding):
            nn.init.normal_(module.weight, std=0.02)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        length = tokens.shape[1]
        x = self.embed(tokens)
        cos, sin = self.cos[:length], self.sin[:length]
        for block in self.blocks:
            x = block(x, cos, sin)
        return self.norm(x) @ self.embed.weight.T  # tied output layer

    def parameter_count(self) -> int:
        return sum(p.numel() for p in self.parameters())


def masked_diffusion_loss(
    model: DiffusionLM, tokens: torch.Tensor, answer: torch.Tensor, mask_id: int, generator: torch.Generator
) -> torch.Tensor:
    """LLaDA's fine-tuning loss: mask each answer position with probability t ~ U(0, 1) (the prompt never),
    cross-entropy on the masked positions weighted by 1/t, averaged over the answer's length."""
    batch = tokens.shape[0]
    t = torch.rand(batch, 1, generator=generator).clamp_min(1e-3)
    masked = (torch.rand(tokens.shape, generator=generator) < t) & answer
    inputs = torch.where(masked, torch.full_like(tokens, mask_id), tokens)
    logits = model(inputs)
    losses = F.cross_entropy(logits.transpose(1, 2), tokens, reduction="none")
    weighted = (losses * masked / t).sum(dim=1) / answer.sum(dim=1).clamp_min(1)
    return weighted.mean()


def count_to_str(count: int) -> str:
    return f"{count / 1e6:.1f}M" if count >= 1e6 else f"{count / 1e3:.0f}K"


def cosine_rate(step: int, total: int, peak: float, warmup: int) -> float:
    if step < warmup:
        return peak * (step + 1) / warmup
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))
