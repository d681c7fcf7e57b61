"""The shape of a LLaMA-family diffusion transformer (LLaDA, Dream, SDAR, Fast-dLLM v2) and what follows from
it alone: the checkpoint's tensor names and shapes, and the memory its weights take loaded each way.

Standard library only: the torch transformer, the training code and the GPU check import it without any
of the model-file readers (`models/hf_checkpoint.py` reads a checkpoint folder into a spec).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TransformerSpec:
    """The shape of a LLaMA-family diffusion transformer, whatever the checkpoint called its fields."""

    architecture: str  # "llada" | "dream" | "sdar" | "fast_dllm_v2"
    vocab_size: int
    width: int
    layers: int
    heads: int
    kv_heads: int
    ffn: int
    rope_theta: float
    norm_eps: float
    qkv_bias: bool
    tied_output: bool
    # Dream was initialised from an AR model: the prediction for position i sits on row i - 1.
    shift_logits: bool
    mask_token_id: int
    context_length: int
    eos_token_ids: tuple[int, ...] = ()
    # LLaDA's input_emb_norm multiplies the embeddings by sqrt(width); its scale_logits divides the logits
    # by sqrt(width). Both are off in the released checkpoints.
    embedding_scale: float = 1.0
    logit_scale: float = 1.0
    # LLaDA's rope_full_precision: queries and keys rotated in fp32 whatever the compute dtype.
    rope_fp32: bool = False
    # Qwen3's head_dim (SDAR): the width of one attention head where it is not width // heads; 0 if it is.
    explicit_head_dim: int = 0
    # Qwen3's per-head RMSNorm of queries and keys, after their projections and before rotary (SDAR).
    qk_norm: bool = False
    # Trained block-causally (SDAR, Fast-dLLM v2): attention is bidirectional inside aligned blocks of this
    # many positions and causal across them, so a settled block's keys and values are final (the "block"
    # cache is exact). 0: bidirectional attention (LLaDA, Dream).
    block_causal_length: int = 0

    @property
    def head_dim(self) -> int:
        return self.explicit_head_dim or self.width // self.heads

    @property
    def attention_width(self) -> int:
        """The queries' width (heads x head_dim): the model's width unless head_dim is explicit."""
        return self.heads * self.head_dim


@dataclass(frozen=True)
class MemoryEstimate:
    """Bytes of weights once loaded, per way of loading them, plus what a context of n tokens adds."""

    weights: dict[str, int]
    kv_cache_per_token: int

    def total(self, load_as: str, context_tokens: int) -> int:
        return self.weights[load_as] + self.kv_cache_per_token * context_tokens


# ----- tensor names ------------------------------------------------------------------------------


def expected_tensors(spec: TransformerSpec) -> dict[str, tuple[str, tuple[int, ...]]]:
    """Sharpen's parameter name -> (the checkpoint's tensor name, its shape), for every weight loaded."""
    kv_width = spec.kv_heads * spec.head_dim
    if spec.architecture == "llada":
        root = "model.transformer"
        top = {
            "embed.weight": (f"{root}.wte.weight", (spec.vocab_size, spec.width)),
            "norm.weight": (f"{root}.ln_f.weight", (spec.width,)),
        }
        if not spec.tied_output:
            top["output.weight"] = (f"{root}.ff_out.weight", (spec.vocab_size, spec.width))
        layer_names = {
            "attn_norm.weight": "attn_norm.weight",
            "attention.q.weight": "q_proj.weight",
            "attention.k.weight": "k_proj.weight",
            "attention.v.weight": "v_proj.weight",
            "attention.o.weight": "attn_out.weight",
            "ffn_norm.weight": "ff_norm.weight",
            "gate.weight": "ff_proj.weight",
            "up.weight": "up_proj.weight",
            "down.weight": "ff_out.weight",
            "attention.q.bias": "q_proj.bias",
            "attention.k.bias": "k_proj.bias",
            "attention.v.bias": "v_proj.bias",
        }
        layer_prefix = f"{root}.blocks"
    else:
        top = {
            "embed.weight": ("model.embed_tokens.weight", (spec.vocab_size, spec.width)),
            "norm.weight": ("model.norm.weight", (spec.width,)),
        }
        if not spec.tied_output:
            top["output.weight"] = ("lm_head.weight", (spec.vocab_size, spec.width))
        layer_names = {
            "attn_norm.weight": "input_layernorm.weight",
            "attention.q.weight": "self_attn.q_proj.weight",
            "attention.k.weight": "self_attn.k_proj.weight",
            "attention.v.weight": "self_attn.v_proj.weight",
            "attention.o.weight": "self_attn.o_proj.weight",
            "ffn_norm.weight": "post_attention_layernorm.weight",
            "gate.weight": "mlp.gate_proj.weight",
            "up.weight": "mlp.up_proj.weight",
            "down.weight": "mlp.down_proj.weight",
            "attention.q.bias": "self_attn.q_proj.bias",
            "attention.k.bias": "self_attn.k_proj.bias",
            "attention.v.bias": "self_attn.v_proj.bias",
        }
        if spec.qk_norm:
            layer_names["attention.q_norm.weight"] = "self_attn.q_norm.weight"
            layer_names["attention.k_norm.weight"] = "self_attn.k_norm.weight"
        layer_prefix = "model.layers"
    shapes = {
        "attn_norm.weight": (spec.width,),
        "attention.q.weight": (spec.attention_width, spec.width),
        "attention.k.weight": (kv_width, spec.width),
        "attention.v.weight": (kv_width, spec.width),
        "attention.o.weight": (spec.width, spec.attention_width),
        "attention.q_norm.weight": (spec.head_dim,),
        "attention.k_norm.weight": (spec.head_dim,),
        "ffn_norm.weight": (spec.width,),
        "gate.weight": (spec.ffn, spec.width),
        "up.weight": (spec.ffn, spec.width),
        "down.weight": (spec.width, spec.ffn),
        "attention.q.bias": (spec.attention_width,),
        "attention.k.bias": (kv_width,),
        "attention.v.bias": (kv_width,),
    }
    names = dict(top)
    for layer in range(spec.layers):
        for ours, theirs in layer_names.items():
            if ours.endswith(".bias") and not spec.qkv_bias:
                continue
            names[f"blocks.{layer}.{ours}"] = (f"{layer_prefix}.{layer}.{theirs}", shapes[ours])
    return names


# ----- memory ------------------------------------------------------------------------------------

# bitsandbytes NF4 stores 4 bits per weight plus an absmax per 64 weights; double quantization stores
# those as 8-bit with one fp32 per 256 of them: 0.5 + 1/64 * (1 + 4/256) bytes per weight.
NF4_BYTES = 0.5 + (1 + 4 / 256) / 64
INT8_BYTES = 1 + 4 / 4096  # one int8 per weight, an fp32 scale per output row (rows of ~4096)


def estimate_memory(spec: TransformerSpec) -> MemoryEstimate:
    """What the weights take once loaded, for each way to load them.

    Quantization applies to the transformer blocks' linear layers; embeddings, the output layer and
    the norms stay in the compute dtype (bf16 beside quantized layers, as bitsandbytes users run them).
    """
    kv_width = spec.kv_heads * spec.head_dim
    attention = 2 * spec.attention_width * spec.width + 2 * kv_width * spec.width
    linear = spec.layers * (attention + 3 * spec.ffn * spec.width)
    other = spec.vocab_size * spec.width * (1 if spec.tied_output else 2) + spec.layers * 2 * spec.width + spec.width
    if spec.qkv_bias:
        other += spec.layers * (spec.attention_width + 2 * kv_width)
    if spec.qk_norm:
        other += spec.layers * 2 * spec.head_dim
    weights = {
        "fp32": 4 * (linear + other),
        "bf16": 2 * (linear + other),
        "nf4": int(NF4_BYTES * linear) + 2 * other,
        "int8": int(INT8_BYTES * linear) + 2 * other,
    }
    # Keys and values for every layer at every position, in the compute dtype (2 bytes on a GPU).
    return MemoryEstimate(weights=weights, kv_cache_per_token=2 * spec.layers * kv_width * 2)
