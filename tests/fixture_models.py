"""Tiny real GGUF files written at test time with the gguf package.

The tokenizer is the embedded SmolLM2 model's (copied field by field), so llama.cpp tokenizes real
text; the weights are random and small (2 layers, width 64), so a file loads in milliseconds.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np
from gguf import GGUFReader, GGUFWriter

from models.catalogue import resolve_model

VOCAB = 49152
WIDTH = 64
LAYERS = 2
HEADS = 4
FFN = 128


@dataclass(frozen=True)
class Tokenizer:
    tokens: list[str]
    token_types: list[int]
    merges: list[str]
    chat_template: str


@cache
def smollm2_tokenizer() -> Tokenizer:
    reader = GGUFReader(resolve_model("smollm2-135m-instruct").path)
    fields = reader.fields
    return Tokenizer(
        tokens=list(fields["tokenizer.ggml.tokens"].contents()),
        token_types=list(fields["tokenizer.ggml.token_type"].contents()),
        merges=list(fields["tokenizer.ggml.merges"].contents()),
        chat_template=fields["tokenizer.chat_template"].contents(),
    )


def write_tiny_model(
    path: Path,
    *,
    arch: str = "llama",
    causal: bool | None = None,
    mask_token_id: int | None = None,
    fim: tuple[int, int, int] | None = None,
    shift_logits: bool | None = None,
    with_tensors: bool = True,
    seed: int = 0,
    confident_token: int | None = None,
    tensors: dict[str, np.ndarray] | None = None,
    rope_base: float = 10000.0,
    kv_heads: int = HEADS,
    experts: tuple[int, int] | None = None,
) -> Path:
    """Write a small random-weight model in `arch`'s tensor layout with SmolLM2's tokenizer.

    With `confident_token`, every position predicts that token with probability near 1 (a constant
    direction in the embeddings that the output layer maps onto it), for tests of confidence thresholds.
    `tensors` replaces the random weights (GGUF names, numpy shapes as (rows, columns)).
    """
    tokenizer = smollm2_tokenizer()
    writer = GGUFWriter(str(path), arch)
    writer.add_name(f"tiny-{arch}")
    writer.add_context_length(512)
    writer.add_embedding_length(WIDTH)
    writer.add_block_count(LAYERS)
    writer.add_feed_forward_length(FFN)
    writer.add_head_count(HEADS)
    writer.add_head_count_kv(kv_heads)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_rope_dimension_count(WIDTH // HEADS)
    writer.add_rope_freq_base(rope_base)
    writer.add_vocab_size(VOCAB)
    writer.add_file_type(0)
    if experts is not None:
        writer.add_expert_count(experts[0])
        writer.add_expert_used_count(experts[1])
        writer.add_expert_feed_forward_length(FFN // 2)
    if causal is not None:
        writer.add_bool(f"{arch}.attention.causal", causal)
    if shift_logits is not None:
        writer.add_bool("diffusion.shift_logits", shift_logits)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("smollm")
    writer.add_token_list(tokenizer.tokens)
    writer.add_token_types(tokenizer.token_types)
    writer.add_token_merges(tokenizer.merges)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_add_bos_token(False)
    writer.add_chat_template(tokenizer.chat_template)
    if mask_token_id is not None:
        writer.add_mask_token_id(mask_token_id)
    if fim is not None:
        writer.add_uint32("tokenizer.ggml.fim_pre_token_id", fim[0])
        writer.add_uint32("tokenizer.ggml.fim_suf_token_id", fim[1])
        writer.add_uint32("tokenizer.ggml.fim_mid_token_id", fim[2])
    if with_tensors:
        for name, array in (tensors if tensors is not None else _llama_tensors(seed, confident_token)).items():
            writer.add_tensor(name, array)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def _llama_tensors(seed: int, confident_token: int | None) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)

    def weight(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) * 0.02).astype(np.float32)

    tensors = {
        "token_embd.weight": weight(VOCAB, WIDTH),
        "output_norm.weight": np.ones(WIDTH, dtype=np.float32),
        "output.weight": weight(VOCAB, WIDTH),
    }
    if confident_token is not None:
        tensors["token_embd.weight"][:, 0] = 1.0
        tensors["output.weight"][confident_token, 0] = 3.0
    for layer in range(LAYERS):
        block = f"blk.{layer}"
        tensors |= {
            f"{block}.attn_norm.weight": np.ones(WIDTH, dtype=np.float32),
            f"{block}.attn_q.weight": weight(WIDTH, WIDTH),
            f"{block}.attn_k.weight": weight(WIDTH, WIDTH),
            f"{block}.attn_v.weight": weight(WIDTH, WIDTH),
            f"{block}.attn_output.weight": weight(WIDTH, WIDTH),
            f"{block}.ffn_norm.weight": np.ones(WIDTH, dtype=np.float32),
            f"{block}.ffn_gate.weight": weight(FFN, WIDTH),
            f"{block}.ffn_up.weight": weight(FFN, WIDTH),
            f"{block}.ffn_down.weight": weight(WIDTH, FFN),
        }
    return tensors


def moe_tensors(seed: int = 0, experts: int = 4, residual_scale: float = 1.0) -> dict[str, np.ndarray]:
    """Random weights in the Qwen3-MoE layout (RND1's): per-head query and key norms and `experts`
    experts of FFN // 2 per layer (GGUF names, numpy shapes as (rows, columns))."""
    rng = np.random.default_rng(seed)
    head = WIDTH // HEADS

    def weight(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) * 0.02).astype(np.float32)

    tensors = {
        "token_embd.weight": weight(VOCAB, WIDTH),
        "output_norm.weight": np.ones(WIDTH, dtype=np.float32),
        "output.weight": weight(VOCAB, WIDTH),
    }
    for layer in range(LAYERS):
        block = f"blk.{layer}"
        tensors |= {
            f"{block}.attn_norm.weight": np.ones(WIDTH, dtype=np.float32),
            f"{block}.attn_q.weight": weight(WIDTH, WIDTH),
            f"{block}.attn_k.weight": weight(WIDTH, WIDTH),
            f"{block}.attn_v.weight": weight(WIDTH, WIDTH),
            f"{block}.attn_output.weight": weight(WIDTH, WIDTH) * residual_scale,
            f"{block}.attn_q_norm.weight": np.ones(head, dtype=np.float32),
            f"{block}.attn_k_norm.weight": np.ones(head, dtype=np.float32),
            f"{block}.ffn_norm.weight": np.ones(WIDTH, dtype=np.float32),
            f"{block}.ffn_gate_inp.weight": weight(experts, WIDTH),
            f"{block}.ffn_gate_exps.weight": weight(experts, FFN // 2, WIDTH),
            f"{block}.ffn_up_exps.weight": weight(experts, FFN // 2, WIDTH),
            f"{block}.ffn_down_exps.weight": weight(experts, WIDTH, FFN // 2) * residual_scale,
        }
    return tensors


def calm_tensors(seed: int = 0, residual_scale: float = 0.25) -> dict[str, np.ndarray]:
    """The llama-layout random weights with the attention and FFN outputs scaled down: each position's
    prediction leans on its own token more than on a random model's chaotic mixing of the others, as a
    trained model's is steadier than random weights, so comparisons of caches measure the cache."""
    return {
        name: array * residual_scale if name.endswith(("attn_output.weight", "ffn_down.weight")) else array
        for name, array in _llama_tensors(seed, None).items()
    }
