"""LLaDA, Dream, SDAR and Fast-dLLM v2 in plain torch: a LLaMA-family transformer with an optional KV context.

One implementation both serves (the torch backend, engines/diffusion/hf) and trains (Sharpen's own
embedded model, training), so what is trained is exactly what is served.

All four architectures are the same computation with different switches (TransformerSpec): RMSNorm,
rotary embeddings in the Hugging Face layout (rotate_half), attention with optional grouped KV heads,
SwiGLU, an output layer. Dream and Fast-dLLM v2 add QKV biases and shift their logits (the backend handles
the shift); SDAR (Qwen3) normalises each head's queries and keys and may give heads a width of their own.
LLaDA and Dream attend bidirectionally; SDAR and Fast-dLLM v2 were trained block-causally, which the
caller asks for with `mask` or by decoding block by block against the keys and values before the block.
No remote code is run: the weights load by name into these modules.

`forward` can attend to extra keys and values computed earlier (`context`): that is how the backend's
prefix and dual caches skip recomputing the positions that do not change within a block.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from models.transformer_spec import TransformerSpec

# Which keys each query may attend to (True: may); None is full, bidirectional attention.
Mask = torch.Tensor | None


def block_causal_mask(length: int, block_length: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """Block-causal attention over positions 0..length-1 (SDAR, Fast-dLLM v2): a query sees every key of
    its own aligned block and of the blocks before it, none after."""
    block = torch.arange(length, device=device) // block_length
    return block[None, :] <= block[:, None]


@dataclass
class LayerKV:
    keys: torch.Tensor  # (1, kv_heads, positions, head_dim), rotary embedding applied
    values: torch.Tensor

    def to(self, device: torch.device | str, non_blocking: bool = False) -> LayerKV:
        """Move to a device (accelerate's hooks call this when layers sit on different devices)."""
        return LayerKV(
            self.keys.to(device, non_blocking=non_blocking), self.values.to(device, non_blocking=non_blocking)
        )


class RMSNorm(nn.Module):
    def __init__(self, width: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(width))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # Normalise in fp32 whatever the compute dtype, as the reference implementations do.
        x32 = x.float()
        normed = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return normed.to(x.dtype) * self.weight


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    return x * cos + rotate_half(x) * sin


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class Rotary(nn.Module):
    inverse: torch.Tensor  # a buffer, registered in __init__

    def __init__(self, head_dim: int, theta: float) -> None:
        super().__init__()
        inverse = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
        self.register_buffer("inverse", inverse.float(), persistent=False)

    def tables(self, positions: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        angles = positions.float()[:, None] * self.inverse[None, :]
        angles = torch.cat((angles, angles), dim=-1)
        return angles.cos().to(dtype), angles.sin().to(dtype)


class Attention(nn.Module):
    def __init__(self, spec: TransformerSpec) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = spec.heads, spec.kv_heads, spec.head_dim
        self.rope_fp32 = spec.rope_fp32
        kv_width = spec.kv_heads * spec.head_dim
        self.q = nn.Linear(spec.width, spec.attention_width, bias=spec.qkv_bias)
        self.k = nn.Linear(spec.width, kv_width, bias=spec.qkv_bias)
        self.v = nn.Linear(spec.width, kv_width, bias=spec.qkv_bias)
        self.o = nn.Linear(spec.attention_width, spec.width, bias=False)
        self.q_norm = RMSNorm(spec.head_dim, spec.norm_eps) if spec.qk_norm else None
        self.k_norm = RMSNorm(spec.head_dim, spec.norm_eps) if spec.qk_norm else None

    def forward(
        self, h: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, context: LayerKV | None, mask: Mask = None
    ) -> tuple[torch.Tensor, LayerKV]:
        batch, length = h.shape[:2]
        q = self.q(h).view(batch, length, self.heads, self.head_dim).transpose(1, 2)
        k = self.k(h).view(batch, length, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v(h).view(batch, length, self.kv_heads, self.head_dim).transpose(1, 2)
        if self.q_norm is not None and self.k_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        if self.rope_fp32:
            q, k = (
                rotate(q.float(), cos.float(), sin.float()).to(q.dtype),
                rotate(k.float(), cos.float(), sin.float()).to(k.dtype),
            )
        else:
            q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        own = LayerKV(k, v)
        if context is not None:
            # Without a mask, where the cached positions sit in the key list does not matter.
            k = torch.cat((context.keys, k), dim=2)
            v = torch.cat((context.values, v), dim=2)
        attended = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=self.kv_heads != self.heads)
        return self.o(attended.transpose(1, 2).reshape(batch, length, -1)), own


class Block(nn.Module):
    def __init__(self, spec: TransformerSpec) -> None:
        super().__init__()
        self.attn_norm = RMSNorm(spec.width, spec.norm_eps)
        self.attention = Attention(spec)
        self.ffn_norm = RMSNorm(spec.width, spec.norm_eps)
        self.gate = nn.Linear(spec.width, spec.ffn, bias=False)
        self.up = nn.Linear(spec.width, spec.ffn, bias=False)
        self.down = nn.Linear(spec.ffn, spec.width, bias=False)

    def forward(
        self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, context: LayerKV | None, mask: Mask = None
    ) -> tuple[torch.Tensor, LayerKV]:
        attended, own = self.attention(self.attn_norm(x), cos, sin, context, mask)
        x = x + attended
        h = self.ffn_norm(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h)), own


class DiffusionTransformer(nn.Module):
    def __init__(self, spec: TransformerSpec) -> None:
        super().__init__()
        self.spec = spec
        self.embed = nn.Embedding(spec.vocab_size, spec.width)
        self.blocks = nn.ModuleList(Block(spec) for _ in range(spec.layers))
        self.norm = RMSNorm(spec.width, spec.norm_eps)
        self.rotary = Rotary(spec.head_dim, spec.rope_theta)
        if not spec.tied_output:
            self.output = nn.Linear(spec.width, spec.vocab_size, bias=False)

    def forward(
        self,
        tokens: torch.Tensor,
        positions: torch.Tensor,
        context: list[LayerKV] | None = None,
        mask: Mask = None,
    ) -> tuple[torch.Tensor, list[LayerKV]]:
        """Hidden states (batch, n, width) for `tokens` (batch, n) at `positions` (n,), and each layer's own
        keys and values. With `context` (batch 1), every layer also attends to those earlier-computed keys
        and values. `mask` (n, keys), True where a query may attend to a key: none is full attention."""
        x = self.embed(tokens)
        if self.spec.embedding_scale != 1.0:
            x = x * self.spec.embedding_scale
        cos, sin = self.rotary.tables(positions, x.dtype)
        cos, sin = cos.to(x.device), sin.to(x.device)
        computed: list[LayerKV] = []
        for index, block in enumerate(self.blocks):
            x, own = block(x, cos, sin, None if context is None else context[index], mask)
            computed.append(own)
        return x, computed

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """Output logits for some rows of `forward`'s hidden states (the final norm included)."""
        normed = self.norm(hidden)
        if self.spec.tied_output:
            weight = self.embed.weight
            logits = F.linear(normed.to(device=weight.device, dtype=weight.dtype), weight)
        else:
            logits = self.output(normed)
        return logits * self.spec.logit_scale if self.spec.logit_scale != 1.0 else logits
