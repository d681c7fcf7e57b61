"""A draft model's own decoding defaults, as its file states them (for a model named by path, which has no
catalogue entry to carry them)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from models.errors import ModelError
from models.gguf_info import inspect_gguf
from models.hf_checkpoint import inspect_checkpoint

# The block-causal models' authors' decoding loop (DiffusionSettings.sampler) and confidence threshold:
# SDAR's generate.py (low_confidence_dynamic, 0.85) and Fast-dLLM v2's chat script (0.9).
AUTHORS_DECODING: dict[str, tuple[str, float]] = {"sdar": ("sdar", 0.85), "fast_dllm_v2": ("fast_dllm_v2", 0.9)}


def file_decoding(path: Path) -> dict[str, Any]:
    """The draft settings a model file implies: for a block-causal model, the block length it was trained
    with and its authors' sampler and threshold; nothing for any other, or a file that cannot be read (the
    engine's load says why)."""
    try:
        if path.is_dir():
            spec = inspect_checkpoint(path).spec
            if not spec.block_causal_length:
                return {}
            sampler, threshold = AUTHORS_DECODING.get(spec.architecture, ("", 0.0))
            block_length = spec.block_causal_length
        else:
            info = inspect_gguf(path)
            if not info.block_causal_length:
                return {}
            sampler, threshold = info.decoding_sampler, info.decoding_threshold
            block_length = info.block_causal_length
    except (ModelError, OSError):
        return {}
    found: dict[str, Any] = {"block_length": block_length, "sampler": sampler, "threshold": threshold}
    return {name: value for name, value in found.items() if value}
