"""Tiny Hugging Face checkpoints in the real LLaDA, Dream, SDAR and Fast-dLLM v2 layouts, written at test time.

Same shapes and tokenizer as the tiny GGUFs (SmolLM2's vocabulary, 2 layers, width 64), weights under the
names the real checkpoints use, a real config.json, a tokenizer.json built from SmolLM2's vocabulary and
merges, and a tokenizer_config.json with its chat template. `export_gguf` writes the same weights as a
llama.cpp GGUF (LLaDA: q and k rows permuted into ggml's rope layout, as llama.cpp's converter does;
models/layouts.py).

SDAR (Qwen3: per-head q and k norms, heads of an explicit head_dim wider than width // heads, no biases,
an untied lm_head) and Fast-dLLM v2 (Qwen2.5: QKV biases, tied embeddings) carry their mask token as the
real ones do, by its text in the tokenizer: token MASK_ID is renamed to it (`<|MASK|>`, `|<MASK>|`).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from fixture_models import FFN, HEADS, LAYERS, VOCAB, WIDTH, smollm2_tokenizer, write_tiny_model
from safetensors.numpy import save_file

from models.layouts import to_gguf

MASK_ID = 16
KV_HEADS_DREAM = 2  # Dream uses grouped KV heads; the fixture does too (and SDAR's and Fast-dLLM v2's)
SDAR_HEAD_DIM = 32  # explicit, as Qwen3's: 4 heads of 32 are wider (128) than the model (64)
MASK_TEXT = {"sdar": "<|MASK|>", "fast_dllm_v2": "|<MASK>|"}


def llada_config(**overrides: object) -> dict[str, object]:
    config: dict[str, object] = {
        "architectures": ["LLaDAModelLM"],
        "model_type": "llada",
        "d_model": WIDTH,
        "n_heads": HEADS,
        "n_kv_heads": HEADS,
        "n_layers": LAYERS,
        "mlp_hidden_size": FFN,
        "vocab_size": VOCAB,
        "embedding_size": VOCAB,
        "rope_theta": 10000.0,
        "rms_norm_eps": 1e-5,
        "include_bias": False,
        "include_qkv_bias": False,
        "weight_tying": False,
        "block_type": "llama",
        "activation_type": "silu",
        "rope": True,
        "layer_norm_type": "rms",
        "mask_token_id": MASK_ID,
        "max_sequence_length": 512,
        "eos_token_id": 2,
        "torch_dtype": "float32",
    }
    config.update(overrides)
    return config


def _qwen_config(
    architecture: str, model_type: str, layout: dict[str, object], overrides: dict[str, object]
) -> dict[str, object]:
    """A config in the Qwen2 family's keys (Dream, SDAR's Qwen3, Fast-dLLM v2's Qwen2.5)."""
    config: dict[str, object] = {
        "architectures": [architecture],
        "model_type": model_type,
        "hidden_size": WIDTH,
        "num_attention_heads": HEADS,
        "num_key_value_heads": KV_HEADS_DREAM,
        "num_hidden_layers": LAYERS,
        "intermediate_size": FFN,
        "vocab_size": VOCAB,
        "rope_theta": 10000.0,
        "max_position_embeddings": 512,
        "eos_token_id": 2,
        "torch_dtype": "float32",
    }
    return config | layout | overrides


def dream_config(**overrides: object) -> dict[str, object]:
    layout: dict[str, object] = {"rms_norm_eps": 1e-5, "tie_word_embeddings": False, "mask_token_id": MASK_ID}
    return _qwen_config("DreamModel", "Dream", layout, overrides)


# The switches SDAR's and Fast-dLLM v2's configs carry, at the values Sharpen computes.
QWEN_SWITCHES: dict[str, object] = {
    "hidden_act": "silu",
    "rope_scaling": None,
    "rms_norm_eps": 1e-6,
    "use_sliding_window": False,
}


def sdar_config(**overrides: object) -> dict[str, object]:
    layout = QWEN_SWITCHES | {
        "head_dim": SDAR_HEAD_DIM,
        "attention_bias": False,
        "tie_word_embeddings": False,
        "block_size": 4,
    }
    return _qwen_config("SDARForCausalLM", "sdar", layout, overrides)


def fast_dllm_v2_config(**overrides: object) -> dict[str, object]:
    layout = QWEN_SWITCHES | {"tie_word_embeddings": True, "bd_size": 32}
    return _qwen_config("Fast_dLLM_QwenForCausalLM", "Fast_dLLM_Qwen", layout, overrides)


CONFIGS = {"llada": llada_config, "dream": dream_config, "sdar": sdar_config, "fast_dllm_v2": fast_dllm_v2_config}


def random_weights(architecture: str, seed: int = 0) -> dict[str, np.ndarray]:
    """Sharpen-side names -> arrays. Embeddings and output are large enough that greedy choices are
    clear-cut (no near-ties for rounding to flip between backends)."""
    rng = np.random.default_rng(seed)
    head_dim = SDAR_HEAD_DIM if architecture == "sdar" else WIDTH // HEADS
    kv_width = (HEADS if architecture == "llada" else KV_HEADS_DREAM) * head_dim
    q_width = HEADS * head_dim

    def weight(*shape: int, scale: float = 0.15) -> np.ndarray:
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    tensors = {
        "embed.weight": weight(VOCAB, WIDTH, scale=1.0),
        "norm.weight": (1 + weight(WIDTH, scale=0.1)),
        "output.weight": weight(VOCAB, WIDTH, scale=0.5),
    }
    for layer in range(LAYERS):
        block = f"blocks.{layer}"
        tensors |= {
            f"{block}.attn_norm.weight": 1 + weight(WIDTH, scale=0.1),
            f"{block}.attention.q.weight": weight(q_width, WIDTH),
            f"{block}.attention.k.weight": weight(kv_width, WIDTH),
            f"{block}.attention.v.weight": weight(kv_width, WIDTH),
            f"{block}.attention.o.weight": weight(WIDTH, q_width),
            f"{block}.ffn_norm.weight": 1 + weight(WIDTH, scale=0.1),
            f"{block}.gate.weight": weight(FFN, WIDTH),
            f"{block}.up.weight": weight(FFN, WIDTH),
            f"{block}.down.weight": weight(WIDTH, FFN),
        }
        if architecture in ("dream", "fast_dllm_v2"):
            tensors |= {
                f"{block}.attention.q.bias": weight(WIDTH, scale=0.1),
                f"{block}.attention.k.bias": weight(kv_width, scale=0.1),
                f"{block}.attention.v.bias": weight(kv_width, scale=0.1),
            }
        if architecture == "sdar":
            tensors |= {
                f"{block}.attention.q_norm.weight": 1 + weight(head_dim, scale=0.1),
                f"{block}.attention.k_norm.weight": 1 + weight(head_dim, scale=0.1),
            }
    if architecture == "fast_dllm_v2":
        del tensors["output.weight"]  # tied to the embeddings, as the 1.5B checkpoint's
    return tensors


HF_NAMES = {
    "llada": {
        "embed.weight": "model.transformer.wte.weight",
        "norm.weight": "model.transformer.ln_f.weight",
        "output.weight": "model.transformer.ff_out.weight",
        "attn_norm.weight": "model.transformer.blocks.{i}.attn_norm.weight",
        "attention.q.weight": "model.transformer.blocks.{i}.q_proj.weight",
        "attention.k.weight": "model.transformer.blocks.{i}.k_proj.weight",
        "attention.v.weight": "model.transformer.blocks.{i}.v_proj.weight",
        "attention.o.weight": "model.transformer.blocks.{i}.attn_out.weight",
        "ffn_norm.weight": "model.transformer.blocks.{i}.ff_norm.weight",
        "gate.weight": "model.transformer.blocks.{i}.ff_proj.weight",
        "up.weight": "model.transformer.blocks.{i}.up_proj.weight",
        "down.weight": "model.transformer.blocks.{i}.ff_out.weight",
    },
    "dream": {
        "embed.weight": "model.embed_tokens.weight",
        "norm.weight": "model.norm.weight",
        "output.weight": "lm_head.weight",
        "attn_norm.weight": "model.layers.{i}.input_layernorm.weight",
        "attention.q.weight": "model.layers.{i}.self_attn.q_proj.weight",
        "attention.k.weight": "model.layers.{i}.self_attn.k_proj.weight",
        "attention.v.weight": "model.layers.{i}.self_attn.v_proj.weight",
        "attention.o.weight": "model.layers.{i}.self_attn.o_proj.weight",
        "attention.q.bias": "model.layers.{i}.self_attn.q_proj.bias",
        "attention.k.bias": "model.layers.{i}.self_attn.k_proj.bias",
        "attention.v.bias": "model.layers.{i}.self_attn.v_proj.bias",
        "ffn_norm.weight": "model.layers.{i}.post_attention_layernorm.weight",
        "gate.weight": "model.layers.{i}.mlp.gate_proj.weight",
        "up.weight": "model.layers.{i}.mlp.up_proj.weight",
        "down.weight": "model.layers.{i}.mlp.down_proj.weight",
    },
}
HF_NAMES["fast_dllm_v2"] = HF_NAMES["dream"]
HF_NAMES["sdar"] = HF_NAMES["dream"] | {
    "attention.q_norm.weight": "model.layers.{i}.self_attn.q_norm.weight",
    "attention.k_norm.weight": "model.layers.{i}.self_attn.k_norm.weight",
}


def hf_name(architecture: str, ours: str) -> str:
    if ours.startswith("blocks."):
        _, layer, rest = ours.split(".", 2)
        return HF_NAMES[architecture][rest].format(i=layer)
    return HF_NAMES[architecture][ours]


def write_tokenizer(folder: Path, mask_text: str | None = None) -> None:
    """SmolLM2's tokenizer; with `mask_text`, its special token MASK_ID renamed to that text (an added token)."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    source = smollm2_tokenizer()
    tokens = list(source.tokens)
    if mask_text is not None:
        tokens[MASK_ID] = mask_text
    vocab = {token: index for index, token in enumerate(tokens)}
    merges = [(left, right) for left, right in (merge.split(" ", 1) for merge in source.merges)]
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False)]
    )
    tokenizer.decoder = decoders.ByteLevel()
    specials = [token for token, kind in zip(tokens, source.token_types, strict=True) if kind == 3]
    tokenizer.add_special_tokens([AddedToken(token, special=True) for token in specials])
    tokenizer.save(str(folder / "tokenizer.json"))
    config = {
        "bos_token": "<|im_start|>",
        "eos_token": "<|im_end|>",
        "add_bos_token": False,
        "chat_template": source.chat_template,
    }
    (folder / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")


def write_checkpoint(
    folder: Path,
    architecture: str,
    *,
    weights: dict[str, np.ndarray] | None = None,
    config: dict[str, object] | None = None,
    shards: int = 1,
    seed: int = 0,
) -> Path:
    """A checkpoint folder in the real layout; `shards` > 1 splits the weights with an index file."""
    folder.mkdir(parents=True, exist_ok=True)
    weights = weights if weights is not None else random_weights(architecture, seed)
    config = config if config is not None else CONFIGS[architecture]()
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    if architecture == "sdar":  # SDAR's stop ids come from here: <|im_end|> and <|endoftext|>
        (folder / "generation_config.json").write_text(json.dumps({"eos_token_id": [2, 0]}), encoding="utf-8")
    named = {hf_name(architecture, ours): array for ours, array in weights.items()}
    if shards == 1:
        save_file(named, str(folder / "model.safetensors"))
    else:
        names = sorted(named)
        weight_map: dict[str, str] = {}
        for index in range(shards):
            file = f"model-{index + 1:05d}-of-{shards:05d}.safetensors"
            part = names[index::shards]
            save_file({name: named[name] for name in part}, str(folder / file))
            weight_map |= dict.fromkeys(part, file)
        index_json = {"metadata": {}, "weight_map": weight_map}
        (folder / "model.safetensors.index.json").write_text(json.dumps(index_json), encoding="utf-8")
    write_tokenizer(folder, MASK_TEXT.get(architecture))
    return folder


def export_gguf(path: Path, architecture: str, weights: dict[str, np.ndarray]) -> Path:
    """The same weights as a llama.cpp diffusion GGUF of `architecture`."""
    kv_heads = KV_HEADS_DREAM if architecture == "dream" else HEADS
    return write_tiny_model(
        path,
        arch=architecture,
        mask_token_id=MASK_ID,
        shift_logits=architecture == "dream",
        tensors=to_gguf(weights, HEADS, kv_heads, ggml_rope=architecture == "llada"),
        kv_heads=kv_heads,
    )
