"""The embedded diffusion model for training: the torch backend's own LLaDA module at a small size.

It is `models.transformer.DiffusionTransformer` with a LLaDA spec (bidirectional, predictions in place,
tied output), so the weights trained here are served unchanged by the torch backend (as a LLaDA
checkpoint folder) and, with q and k rows permuted into ggml's rope layout, by llama.cpp (as Sharpen's
cacheable `llama` GGUF).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from models.layouts import hf_rope_rows
from models.transformer import DiffusionTransformer
from models.transformer_spec import TransformerSpec


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


@dataclass(frozen=True)
class MaskDraw:
    masked: torch.Tensor  # positions shown as the mask token
    learned: torch.Tensor  # positions whose cross-entropy counts
    t: torch.Tensor  # each row's masking probability, (batch, 1)
    denominator: torch.Tensor  # each row's averaging length, (batch,)


def draw_masks(
    answer: torch.Tensor, generator: torch.Generator, *, block_share: float = 0.0, block_length: int = 32
) -> MaskDraw:
    """LLaDA's fine-tuning draw: each answer position masked with probability t ~ U(0, 1) (the prompt
    never), learned where masked, averaged over the answer's length.

    A `block_share` of the rows instead take the state that semi-autoregressive decoding meets: the
    answer's blocks before a random block b clean, block b masked with probability t, every block after
    it fully masked; only block b's masked positions are learned, averaged over the block."""
    batch, length = answer.shape
    t = torch.rand(batch, 1, generator=generator).clamp_min(1e-3)
    noise = torch.rand(answer.shape, generator=generator) < t
    masked = noise & answer
    learned = masked
    denominator = answer.sum(dim=1).float()
    if block_share > 0:
        positions = torch.arange(length)[None, :]
        start = answer.float().argmax(dim=1, keepdim=True)  # the answer is one run to the end
        n_blocks = ((length - start + block_length - 1) // block_length).clamp_min(1)
        block = (torch.rand(batch, 1, generator=generator) * n_blocks).long()
        lo = start + block * block_length
        hi = (lo + block_length).clamp_max(length)
        in_block = (positions >= lo) & (positions < hi) & answer
        blockwise = torch.rand(batch, 1, generator=generator) < block_share
        masked = torch.where(blockwise, (noise & in_block) | (positions >= hi), masked)
        learned = torch.where(blockwise, noise & in_block, learned)
        denominator = torch.where(blockwise[:, 0], (hi - lo)[:, 0].float(), denominator)
    return MaskDraw(masked, learned, t, denominator.clamp_min(1))


def masked_diffusion_loss(
    model: DiffusionTransformer,
    tokens: torch.Tensor,
    answer: torch.Tensor,
    mask_id: int,
    generator: torch.Generator,
    *,
    block_share: float = 0.0,
) -> torch.Tensor:
    """Cross-entropy on the learned positions of a mask draw, weighted by 1/t (LLaDA's bound)."""
    draw = draw_masks(answer, generator, block_share=block_share)
    inputs = torch.where(draw.masked, torch.full_like(tokens, mask_id), tokens)
    logits = all_logits(model, inputs)
    losses = F.cross_entropy(logits.transpose(1, 2), tokens, reduction="none")
    weighted = (losses * draw.learned / draw.t).sum(dim=1) / draw.denominator
    return weighted.mean()


def deepened(state: dict[str, torch.Tensor], layers: int, new_layers: int) -> dict[str, torch.Tensor]:
    """A trained model's weights grown to `new_layers` by repeating each layer in place ([0, 0, 1, 1, ...]),
    the repeats' output projections zeroed, so the grown model computes exactly what the trained one did
    and training goes on from there with the extra capacity."""
    if new_layers < layers:
        raise ValueError(f"cannot deepen {layers} layers to {new_layers}")
    grown = {name: tensor for name, tensor in state.items() if not name.startswith("blocks.")}
    for new in range(new_layers):
        old = new * layers // new_layers
        repeat = new > 0 and (new - 1) * layers // new_layers == old
        for name, tensor in state.items():
            prefix = f"blocks.{old}."
            if name.startswith(prefix):
                suffix = name[len(prefix) :]
                zeroed = repeat and suffix in ("attention.o.weight", "down.weight")
                grown[f"blocks.{new}.{suffix}"] = torch.zeros_like(tensor) if zeroed else tensor.clone()
    return grown


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
