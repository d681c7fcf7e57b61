"""What a GGUF file says about itself, read before llama.cpp touches it."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from gguf import LlamaFileType

from models.gguf_header import ArraySummary, GGUFHeader, read_gguf_header

# Sharpen's metadata keys for a model trained block-causally: its block length, and its authors' decoding
# loop and confidence threshold (the draft defaults where the user set none).
BLOCK_CAUSAL_KEY = "diffusion.block_causal_length"
DECODING_SAMPLER_KEY = "diffusion.decoding.sampler"
DECODING_THRESHOLD_KEY = "diffusion.decoding.threshold"
# Architectures that llama.cpp marks as diffusion (llama_model_is_diffusion) in the version we pin.
LLAMA_CPP_DIFFUSION_ARCHITECTURES = frozenset({"dream", "llada", "llada-moe", "rnd1"})


@dataclass(frozen=True)
class FimTokens:
    prefix: int
    suffix: int
    middle: int


@dataclass(frozen=True)
class GGUFInfo:
    path: Path
    file_size: int
    architecture: str
    name: str | None
    file_type: str | None
    context_length: int | None
    vocab_size: int | None
    n_layers: int | None
    n_embd: int | None
    n_parameters: int
    bos_token_id: int | None
    eos_token_id: int | None
    chat_template: str | None
    fim: FimTokens | None
    mask_token_id: int | None
    # Whether row i of the logits predicts position i+1 (Dream, RND1) rather than i (LLaDA). GGUF files
    # that omit the key mean "shift", as llama.cpp's diffusion example reads them.
    shift_logits: bool
    causal_attention: bool | None
    # The tokenizer's pre-tokenizer ("qwen2" for Dream): Qwen2's tokenizer composes text to NFC first.
    tokenizer_pre: str | None = None
    # Trained block-causally (SDAR, Fast-dLLM v2; BLOCK_CAUSAL_KEY): bidirectional inside aligned blocks of
    # this many positions, causal across them. 0: trained with full attention.
    block_causal_length: int = 0
    decoding_sampler: str = ""
    decoding_threshold: float = 0.0

    @property
    def is_llama_cpp_diffusion(self) -> bool:
        """llama.cpp runs this file as a diffusion model (no KV cache, non-causal)."""
        return self.architecture in LLAMA_CPP_DIFFUSION_ARCHITECTURES

    @property
    def is_cacheable_diffusion(self) -> bool:
        """Our exportable form: an ordinary architecture made bidirectional, with a mask token.

        llama.cpp keeps a KV cache for it, which is what makes a prefix cache possible.
        """
        return not self.is_llama_cpp_diffusion and self.causal_attention is False and self.mask_token_id is not None

    @property
    def is_diffusion(self) -> bool:
        return self.is_llama_cpp_diffusion or self.is_cacheable_diffusion

    def summary(self) -> dict[str, Any]:
        data = asdict(self)
        data["path"] = str(self.path)
        data["chat_template"] = self.chat_template is not None
        data["is_llama_cpp_diffusion"] = self.is_llama_cpp_diffusion
        data["is_cacheable_diffusion"] = self.is_cacheable_diffusion
        return data


def _int_or_none(value: Any) -> int | None:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _vocab_size(meta: dict[str, Any], arch: str) -> int | None:
    tokens = meta.get("tokenizer.ggml.tokens")
    if isinstance(tokens, ArraySummary):
        return tokens.length
    if isinstance(tokens, list):
        return len(tokens)
    return _int_or_none(meta.get(f"{arch}.vocab_size"))


def _file_type(meta: dict[str, Any]) -> str | None:
    raw = meta.get("general.file_type")
    if raw is None:
        return None
    try:
        return LlamaFileType(raw).name.removeprefix("MOSTLY_")
    except ValueError:
        return str(raw)


def _fim_tokens(meta: dict[str, Any]) -> FimTokens | None:
    # Newer converters write fim_*; older ones prefix/suffix/middle.
    for pre, suf, mid in (("fim_pre", "fim_suf", "fim_mid"), ("prefix", "suffix", "middle")):
        ids = [meta.get(f"tokenizer.ggml.{key}_token_id") for key in (pre, suf, mid)]
        found = [i for i in ids if isinstance(i, int)]
        if len(found) == len(ids):
            return FimTokens(*found)
    return None


def info_from_header(header: GGUFHeader) -> GGUFInfo:
    meta = header.metadata
    arch = str(meta.get("general.architecture", "unknown"))
    causal = meta.get(f"{arch}.attention.causal")
    shift = meta.get("diffusion.shift_logits")
    return GGUFInfo(
        path=header.path,
        file_size=header.file_size,
        architecture=arch,
        name=meta.get("general.name"),
        file_type=_file_type(meta),
        context_length=_int_or_none(meta.get(f"{arch}.context_length")),
        vocab_size=_vocab_size(meta, arch),
        n_layers=_int_or_none(meta.get(f"{arch}.block_count")),
        n_embd=_int_or_none(meta.get(f"{arch}.embedding_length")),
        n_parameters=sum(_n_elements(t.shape) for t in header.tensors),
        bos_token_id=_int_or_none(meta.get("tokenizer.ggml.bos_token_id")),
        eos_token_id=_int_or_none(meta.get("tokenizer.ggml.eos_token_id")),
        chat_template=meta.get("tokenizer.chat_template") or None,
        fim=_fim_tokens(meta),
        mask_token_id=_int_or_none(meta.get("tokenizer.ggml.mask_token_id")),
        shift_logits=True if shift is None else bool(shift),
        causal_attention=None if causal is None else bool(causal),
        tokenizer_pre=meta.get("tokenizer.ggml.pre") or None,
        block_causal_length=_int_or_none(meta.get(BLOCK_CAUSAL_KEY)) or 0,
        decoding_sampler=str(meta.get(DECODING_SAMPLER_KEY) or ""),
        decoding_threshold=round(float(meta.get(DECODING_THRESHOLD_KEY) or 0.0), 6),  # stored as float32
    )


def _n_elements(shape: tuple[int, ...]) -> int:
    count = 1
    for dim in shape:
        count *= dim
    return count


def inspect_gguf(path: Path | str) -> GGUFInfo:
    """Read and interpret a GGUF file's header. Raises a ModelFileError subclass for a bad file."""
    return info_from_header(read_gguf_header(path))
