"""SmolLM2's weights as Sharpen's diffusion module (bidirectional, logits shifted as Dream's are), and a LoRA on
every attention and feed-forward matrix: added, and loaded from an adapter GGUF."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from models.adapted import MASK_TOKEN_ID, adapter_info, read_lora
from models.layouts import gguf_name, hf_rope_rows
from models.transformer import DiffusionTransformer
from models.transformer_spec import TransformerSpec

# The matrices the LoRA adapts, by Sharpen's parameter names (models/layouts.py has their GGUF names).
ADAPTED = ("attention.q", "attention.k", "attention.v", "attention.o", "gate", "up", "down")


class LoRALinear(nn.Module):
    """A frozen linear layer plus a trainable low-rank update B·A, scaled by alpha / rank (B starts at 0)."""

    def __init__(self, base: nn.Linear, rank: int, alpha: float) -> None:
        super().__init__()
        self.base = base
        for parameter in base.parameters():
            parameter.requires_grad_(False)
        self.a = nn.Parameter(torch.empty(rank, base.in_features))
        self.b = nn.Parameter(torch.zeros(base.out_features, rank))
        nn.init.kaiming_uniform_(self.a, a=math.sqrt(5))
        self.scale = alpha / rank

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.base(x) + F.linear(F.linear(x, self.a), self.b) * self.scale


def base_model(path: Path) -> DiffusionTransformer:
    """SmolLM2's weights from its GGUF in Sharpen's module, bidirectional, logits shifted."""
    from gguf import GGUFReader
    from gguf.quants import dequantize

    reader = GGUFReader(path)

    def field(key: str) -> float:
        return float(reader.fields[key].contents())

    tensors = {t.name: np.asarray(dequantize(t.data, t.tensor_type), dtype=np.float32) for t in reader.tensors}
    heads, kv_heads = int(field("llama.attention.head_count")), int(field("llama.attention.head_count_kv"))
    layers = sum(1 for name in tensors if name.endswith("attn_q.weight"))
    vocab, width = tensors["token_embd.weight"].shape
    spec = TransformerSpec(
        architecture="dream",
        vocab_size=vocab,
        width=width,
        layers=layers,
        heads=heads,
        kv_heads=kv_heads,
        ffn=tensors["blk.0.ffn_gate.weight"].shape[0],
        rope_theta=field("llama.rope.freq_base"),
        norm_eps=field("llama.attention.layer_norm_rms_epsilon"),
        qkv_bias=False,
        tied_output="output.weight" not in tensors,
        shift_logits=True,
        mask_token_id=MASK_TOKEN_ID,
        context_length=2048,
    )
    model = DiffusionTransformer(spec)
    state = {}
    for ours in model.state_dict():
        tensor = tensors[gguf_name(ours)]
        if ours.endswith("attention.q.weight"):
            tensor = hf_rope_rows(tensor, heads)
        elif ours.endswith("attention.k.weight"):
            tensor = hf_rope_rows(tensor, kv_heads)
        state[ours] = torch.from_numpy(np.array(tensor, dtype=np.float32))
    model.load_state_dict(state)
    for parameter in model.parameters():
        parameter.requires_grad_(False)
    return model


def add_lora(model: DiffusionTransformer, rank: int, alpha: float) -> dict[str, LoRALinear]:
    """Wrap every adapted matrix in place; the wrappers by the adapted weight's Sharpen name."""
    wrapped: dict[str, LoRALinear] = {}
    for index, block in enumerate(model.blocks):
        for name in ADAPTED:
            owner: nn.Module = block
            *path, last = name.split(".")
            for part in path:
                owner = getattr(owner, part)
            lora = LoRALinear(getattr(owner, last), rank, alpha)
            setattr(owner, last, lora)
            wrapped[f"blocks.{index}.{name}.weight"] = lora
    return wrapped


def load_adapter(wrapped: dict[str, LoRALinear], adapter: Path, base: Path) -> None:
    """Set the wrappers' LoRA to the adapter GGUF's (of the same base). Wrappers of a higher rank get the
    adapter's update in their first rows and nothing from the rest (B = 0 there), so they compute the same
    function and train on with the added rank."""
    alpha = adapter_info(adapter).alpha
    with torch.no_grad():
        for name, (a, b) in read_lora(adapter, base, wrapped).items():
            lora, rank = wrapped[name], a.shape[0]
            if rank > lora.a.shape[0]:
                raise ValueError(f"{adapter} has rank {rank}, more than the {lora.a.shape[0]} being trained")
            lora.a[:rank].copy_(torch.from_numpy(a))
            lora.b.zero_()
            scale = (alpha or rank) / rank  # llama.cpp reads a missing alpha as the rank
            lora.b[:, :rank].copy_(torch.from_numpy(b) * scale / lora.scale)
