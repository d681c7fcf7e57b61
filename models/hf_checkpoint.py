"""Hugging Face diffusion checkpoints (LLaDA, Dream, SDAR, Fast-dLLM v2): recognise a folder, check it, say
what it needs.

Torch-free: the architecture comes from config.json and the tensors from the safetensors headers (an
8-byte length and a JSON table), so `sharpen inspect FOLDER` answers without loading a single weight.
The torch backend loads exactly the tensors `expected_tensors` (models/transformer_spec.py) lists, under their
real names.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from models.errors import MissingModelFile, ModelFileError, UnsupportedModel
from models.transformer_spec import MemoryEstimate, TransformerSpec, estimate_memory, expected_tensors

CONFIG_FILE = "config.json"
SINGLE_FILE = "model.safetensors"
INDEX_FILE = "model.safetensors.index.json"
SAFETENSORS_BYTES = {"F64": 8, "F32": 4, "BF16": 2, "F16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1}


class CheckpointError(ModelFileError):
    """A checkpoint folder that cannot be loaded as it is."""


@dataclass(frozen=True)
class TensorEntry:
    shape: tuple[int, ...]
    dtype: str
    file: str


@dataclass(frozen=True)
class CheckpointInfo:
    path: Path
    spec: TransformerSpec
    tensors: dict[str, TensorEntry]
    files: tuple[str, ...]
    size_bytes: int
    torch_dtype: str
    notes: list[str] = field(default_factory=list)

    @property
    def parameter_count(self) -> int:
        count = 0
        for entry in self.tensors.values():
            n = 1
            for dim in entry.shape:
                n *= dim
            count += n
        return count

    def memory(self) -> MemoryEstimate:
        return estimate_memory(self.spec)

    def summary(self) -> dict[str, Any]:
        memory = self.memory()
        gib = 1024**3
        return {
            "path": str(self.path),
            "format": "hf-safetensors",
            "architecture": self.spec.architecture,
            "parameters": self.parameter_count,
            "size_gib": round(self.size_bytes / gib, 3),
            "stored_dtype": self.torch_dtype,
            "layers": self.spec.layers,
            "width": self.spec.width,
            "heads": f"{self.spec.heads} (kv {self.spec.kv_heads})",
            "vocab_size": self.spec.vocab_size,
            "context_length": self.spec.context_length,
            "mask_token_id": self.spec.mask_token_id,
            "shift_logits": self.spec.shift_logits,
            "block_causal_length": self.spec.block_causal_length,
            "files": len(self.files),
            "memory_gib": {
                name: round(memory.total(name, self.spec.context_length) / gib, 2) for name in memory.weights
            },
        }


# ----- config.json -------------------------------------------------------------------------------


def _require(config: dict[str, Any], path: Path, *names: str) -> Any:
    for name in names:
        if name in config and config[name] is not None:
            return config[name]
    raise CheckpointError(
        path, f"config.json has no {' or '.join(repr(n) for n in names)}", "The config is incomplete."
    )


def _as_ids(value: Any) -> tuple[int, ...]:
    if value is None:
        return ()
    if isinstance(value, list):
        return tuple(int(v) for v in value)
    return (int(value),)


def _architecture(config: dict[str, Any]) -> str | None:
    names = [str(n).lower() for n in config.get("architectures") or []]
    model_type = str(config.get("model_type", "")).lower()
    if model_type == "llada" or any(n.startswith("llada") and "moe" not in n for n in names):
        return "llada"
    if model_type == "dream" or any(n.startswith("dream") for n in names):
        return "dream"
    if model_type == "sdar" or any(n.startswith("sdar") and "moe" not in n for n in names):
        return "sdar"
    if "fast_dllm" in model_type or any("fast_dllm" in n for n in names):
        return "fast_dllm_v2"
    return None


# Every key of the authors' config classes (LLaDA's ModelConfig, Dream's DreamConfig) that changes what
# the model computes, with the values Sharpen computes. A checkpoint with another value is refused, naming
# the key, never loaded wrong. Keys only for training or other runtimes (dropouts, init_*, flash
# attention, use_cache, block_group_size, precision) change nothing at inference and are not listed.
LLADA_MUST_BE: dict[str, tuple[Any, ...]] = {
    "block_type": ("llama",),
    "layer_norm_type": ("rms",),
    "activation_type": ("silu",),  # the llama block's act(ff_proj(x)) * up_proj(x), as LLaDA-8B ships
    "include_bias": (False,),  # biases on every projection and norm: not implemented
    "bias_for_layer_norm": (None, False),
    "layer_norm_with_affine": (True,),
    "attention_layer_norm": (False,),  # a norm on queries and keys: not implemented
    "alibi": (False,),
    "rope": (True,),
    "multi_query_attention": (None, False),
}
DREAM_MUST_BE: dict[str, tuple[Any, ...]] = {
    "hidden_act": ("silu",),
    "rope_scaling": (None,),
    "use_sliding_window": (False,),
}
# SDAR is Qwen3's computation (modeling_sdar.py): attention_bias would add biases to q, k, v and o.
SDAR_MUST_BE: dict[str, tuple[Any, ...]] = DREAM_MUST_BE | {"attention_bias": (False,)}
# Fast-dLLM v2 is Qwen2.5's computation (QKV biases always) with block-causal attention.
FAST_DLLM_V2_MUST_BE: dict[str, tuple[Any, ...]] = DREAM_MUST_BE

# The block-causal models' own mask tokens, looked up by their text in the checkpoint's tokenizer, with the
# released checkpoints' ids where the tokenizer does not list them; and the config key of their block length.
BLOCK_MODELS: dict[str, tuple[tuple[str, ...], int, str, int]] = {
    # architecture: (mask texts, fallback mask id, block length key, its default)
    "sdar": (("<|MASK|>", "<MASK>"), 151669, "block_size", 4),
    "fast_dllm_v2": (("|<MASK>|",), 151665, "bd_size", 32),
}


# What LLaDA's ModelConfig assumes for a key config.json leaves out: the reference computes that, so
# Sharpen reads a missing key as this, not as its own choice.
LLADA_DEFAULTS: dict[str, Any] = {
    "block_type": "sequential",
    "layer_norm_type": "default",
    "activation_type": "swiglu",
    "include_bias": False,
    "bias_for_layer_norm": None,
    "layer_norm_with_affine": True,
    "attention_layer_norm": False,
    "alibi": False,
    "rope": False,
    "multi_query_attention": None,
    "weight_tying": True,
    "rope_full_precision": True,
}


def _refuse_unsupported(
    config: dict[str, Any], path: Path, must_be: dict[str, tuple[Any, ...]], defaults: dict[str, Any] | None = None
) -> None:
    for key, allowed in must_be.items():
        value = config.get(key, (defaults or {}).get(key, allowed[0]))
        if value not in allowed:
            raise UnsupportedModel(
                path,
                f"sets {key} = {json.dumps(value)} in config.json{'' if key in config else ' (by leaving it out)'}, "
                "which Sharpen's torch backend does not "
                f"compute (it computes {key} = {json.dumps(allowed[-1])})",
                "Use a GGUF of the model, or a checkpoint without that switch.",
            )


def added_token_ids(folder: Path) -> dict[str, int]:
    """Text -> id of the tokens a checkpoint's tokenizer adds (tokenizer.json's added_tokens and
    tokenizer_config.json's added_tokens_decoder); empty where neither file is there or readable."""
    found: dict[str, int] = {}
    for name, key in (("tokenizer.json", "added_tokens"), ("tokenizer_config.json", "added_tokens_decoder")):
        try:
            table = json.loads((folder / name).read_text(encoding="utf-8")).get(key) or {}
        except (OSError, json.JSONDecodeError, AttributeError):
            continue
        entries = table.items() if isinstance(table, dict) else ((entry.get("id"), entry) for entry in table)
        for token_id, entry in entries:
            if isinstance(entry, dict) and isinstance(entry.get("content"), str) and token_id is not None:
                found.setdefault(entry["content"], int(token_id))
    return found


def _block_model_mask(config: dict[str, Any], architecture: str, added: dict[str, int]) -> int:
    texts, fallback, _, _ = BLOCK_MODELS[architecture]
    if config.get("mask_token_id") is not None:
        return int(config["mask_token_id"])
    return next((added[text] for text in texts if text in added), fallback)


def spec_from_config(config: dict[str, Any], path: Path, added_tokens: dict[str, int] | None = None) -> TransformerSpec:
    """The spec config.json describes. `added_tokens` (text -> id): the tokenizer's added tokens, where a
    block-causal model's mask token is looked up by its text; read from `path` when not given."""
    architecture = _architecture(config)
    if architecture is None:
        found = config.get("architectures") or config.get("model_type") or "nothing"
        raise UnsupportedModel(
            path,
            f"is not a LLaDA or Dream checkpoint, nor an SDAR or Fast-dLLM v2 one (config.json names {found})",
            "The torch backend serves LLaDA, Dream, SDAR and Fast-dLLM v2 checkpoints; other diffusion models "
            "need a GGUF.",
        )
    if architecture == "llada":
        spec = _llada_spec(config, path)
    elif architecture == "dream":
        _refuse_unsupported(config, path, DREAM_MUST_BE)
        spec = _qwen_spec(
            config,
            path,
            architecture="dream",
            qkv_bias=True,
            shift_logits=True,
            mask_token_id=int(_require(config, path, "mask_token_id")),
        )
    else:
        sdar = architecture == "sdar"
        _refuse_unsupported(config, path, SDAR_MUST_BE if sdar else FAST_DLLM_V2_MUST_BE)
        added = added_token_ids(path) if added_tokens is None else added_tokens
        _, _, block_key, block_default = BLOCK_MODELS[architecture]
        spec = _qwen_spec(
            config,
            path,
            architecture=architecture,
            qkv_bias=not sdar,
            shift_logits=not sdar,  # Fast-dLLM v2 keeps its AR base's next-token rows; SDAR predicts in place
            mask_token_id=_block_model_mask(config, architecture, added),
            qk_norm=sdar,
            # Qwen3 reads head_dim from the config, and so does the Qwen2 code Fast-dLLM v2 runs (Dream's
            # does not: it divides the width).
            explicit_head_dim=int(config.get("head_dim") or 0),
            block_causal_length=int(config.get(block_key) or block_default),
        )
    explicit = spec.explicit_head_dim
    if (not explicit and spec.width % spec.heads) or spec.heads % spec.kv_heads or spec.head_dim % 2:
        raise CheckpointError(
            path,
            f"config.json's shape does not add up (width {spec.width}, {spec.heads} heads, {spec.kv_heads} kv heads"
            + (f", head_dim {explicit})" if explicit else ")"),
            "The config is corrupt or from another model.",
        )
    if not 0 <= spec.mask_token_id < spec.vocab_size:
        raise CheckpointError(path, f"mask_token_id {spec.mask_token_id} is outside the vocabulary ({spec.vocab_size})")
    return spec


def _llada_spec(config: dict[str, Any], path: Path) -> TransformerSpec:
    _refuse_unsupported(config, path, LLADA_MUST_BE, LLADA_DEFAULTS)
    heads = int(_require(config, path, "n_heads"))
    width = int(_require(config, path, "d_model"))
    return TransformerSpec(
        architecture="llada",
        vocab_size=int(_require(config, path, "embedding_size", "vocab_size")),
        width=width,
        layers=int(_require(config, path, "n_layers")),
        heads=heads,
        kv_heads=int(config.get("n_kv_heads") or heads),
        ffn=int(config.get("mlp_hidden_size") or width * int(_require(config, path, "mlp_hidden_size", "mlp_ratio"))),
        rope_theta=float(config.get("rope_theta", 10000.0)),
        norm_eps=float(config.get("rms_norm_eps", 1e-5)),
        qkv_bias=bool(config.get("include_qkv_bias")),
        tied_output=bool(config.get("weight_tying", LLADA_DEFAULTS["weight_tying"])),
        shift_logits=False,
        mask_token_id=int(config.get("mask_token_id", 126336)),
        context_length=int(config.get("max_sequence_length", 4096)),
        eos_token_ids=_as_ids(config.get("eos_token_id")),
        rope_fp32=bool(config.get("rope_full_precision", LLADA_DEFAULTS["rope_full_precision"])),
        embedding_scale=width**0.5 if config.get("input_emb_norm") else 1.0,
        logit_scale=1 / width**0.5 if config.get("scale_logits") else 1.0,
    )


def _qwen_spec(config: dict[str, Any], path: Path, **switches: Any) -> TransformerSpec:
    """The Qwen-family config keys (Dream, SDAR, Fast-dLLM v2) plus what the architecture fixes."""
    heads = int(_require(config, path, "num_attention_heads"))
    return TransformerSpec(
        vocab_size=int(_require(config, path, "vocab_size")),
        width=int(_require(config, path, "hidden_size")),
        layers=int(_require(config, path, "num_hidden_layers")),
        heads=heads,
        kv_heads=int(config.get("num_key_value_heads") or heads),
        ffn=int(_require(config, path, "intermediate_size")),
        rope_theta=float(config.get("rope_theta", 10000.0)),
        norm_eps=float(config.get("rms_norm_eps", 1e-6)),
        tied_output=bool(config.get("tie_word_embeddings", False)),
        context_length=int(config.get("max_position_embeddings", 4096)),
        eos_token_ids=_as_ids(config.get("eos_token_id")),
        **switches,
    )


# ----- the folder --------------------------------------------------------------------------------


def is_checkpoint_folder(path: Path) -> bool:
    return path.is_dir() and (path / CONFIG_FILE).is_file()


def read_safetensors_header(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as handle:
            raw = handle.read(8)
            if len(raw) < 8:
                raise CheckpointError(path, "is too short to be a safetensors file", "Download the file again.")
            (length,) = struct.unpack("<Q", raw)
            if length > 100_000_000:
                raise CheckpointError(path, "does not start with a safetensors header", "Download the file again.")
            header = json.loads(handle.read(length))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise CheckpointError(path, f"is not a readable safetensors file ({error})", "Download it again.") from error
    if not isinstance(header, dict):
        raise CheckpointError(path, "has a malformed safetensors header", "Download the file again.")
    header.pop("__metadata__", None)
    return header


def _shard_files(folder: Path) -> list[str]:
    index = folder / INDEX_FILE
    if index.is_file():
        try:
            weight_map = json.loads(index.read_text(encoding="utf-8"))["weight_map"]
        except (OSError, json.JSONDecodeError, KeyError, TypeError) as error:
            raise CheckpointError(index, f"is not a valid shard index ({error})", "Download it again.") from error
        files = sorted(set(weight_map.values()))
        missing = [name for name in files if not (folder / name).is_file()]
        if missing:
            raise MissingModelFile(
                folder,
                f"is missing {len(missing)} of its {len(files)} weight shards ({', '.join(missing)})",
                "The download is incomplete: pull the model again.",
            )
        return files
    if (folder / SINGLE_FILE).is_file():
        return [SINGLE_FILE]
    raise MissingModelFile(
        folder, f"has a config.json but no {SINGLE_FILE} or {INDEX_FILE}", "Only safetensors checkpoints load."
    )


def inspect_checkpoint(path: Path | str) -> CheckpointInfo:
    """Read a checkpoint folder's config and tensor table; raise a ModelError naming what is wrong."""
    folder = Path(path).expanduser()
    if not folder.is_dir():
        raise MissingModelFile(folder, "no such checkpoint folder", "Give the folder that holds config.json.")
    config_path = folder / CONFIG_FILE
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except FileNotFoundError as error:
        raise MissingModelFile(folder, "has no config.json", "Give the folder of a Hugging Face checkpoint.") from error
    except (OSError, json.JSONDecodeError) as error:
        raise CheckpointError(config_path, f"is not valid JSON ({error})", "Download it again.") from error
    if not isinstance(config, dict):
        raise CheckpointError(config_path, "is not a JSON object", "Download it again.")
    spec = spec_from_config(config, folder)
    files = _shard_files(folder)
    tensors: dict[str, TensorEntry] = {}
    size = 0
    for name in files:
        shard = folder / name
        size += shard.stat().st_size
        for tensor, meta in read_safetensors_header(shard).items():
            tensors[tensor] = TensorEntry(tuple(int(d) for d in meta["shape"]), str(meta["dtype"]), name)
    check_tensors(spec, tensors, folder)
    dtypes = sorted({entry.dtype for entry in tensors.values()})
    return CheckpointInfo(
        path=folder,
        spec=spec,
        tensors=tensors,
        files=tuple(files),
        size_bytes=size,
        torch_dtype=str(config.get("torch_dtype") or "/".join(dtypes)),
    )


def check_tensors(spec: TransformerSpec, tensors: dict[str, TensorEntry], folder: Path) -> None:
    problems: list[str] = []
    for theirs, shape in expected_tensors(spec).values():
        entry = tensors.get(theirs)
        if entry is None:
            problems.append(f"{theirs} is missing")
        elif entry.shape != shape:
            problems.append(f"{theirs} has shape {list(entry.shape)}, config.json implies {list(shape)}")
        elif entry.dtype not in SAFETENSORS_BYTES or entry.dtype in {"BOOL", "I64", "I32", "I16", "I8", "U8"}:
            problems.append(f"{theirs} is stored as {entry.dtype}, not a float type")
    if problems:
        shown = "; ".join(problems[:4]) + (f"; and {len(problems) - 4} more" if len(problems) > 4 else "")
        raise CheckpointError(
            folder,
            f"does not match its config.json: {shown}",
            "The weights and config.json are from different models, or the download is incomplete.",
        )
