"""How a diffusion engine is loaded, by either backend: each option declared here once."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from engines.diffusion.backend import CacheMode, KvChoice
from engines.options import at_least, not_empty, one_of, option


@dataclass(frozen=True)
class DiffusionLoadSettings:
    """What a diffusion model is loaded with. The llama.cpp backend (GGUFs) reads n_ctx, n_threads, cache,
    kv_type and n_gpu_layers; the torch backend (checkpoint folders) reads n_ctx, n_threads, cache and
    the torch options. The config's [diffusion] section extends this class, so the defaults here are the
    ones users get."""

    n_ctx: int = option(1024, "context of the diffusion engine: prompt + draft + text after it", at_least(256))
    n_threads: int = option(
        0,
        "CPU threads; 0 chooses per call: the cores this process may use, less those other work keeps busy",
        at_least(0),
    )
    # The cache to use where the model allows one (llama.cpp: the cacheable form); full re-decoding otherwise.
    cache: CacheMode = option(
        "dual",
        "keys and values kept between passes where the model allows it: dual (before and after the block), "
        "prefix (before it), none (every pass decodes everything), or block (block-causal attention: a pass "
        "decodes its block alone, settled blocks are written once and never again)",
    )
    # llama.cpp's "auto" is f32 below SMALL_MODEL parameters (exact to float rounding, at twice the memory
    # of f16, which is little there) and f16 from there on.
    kv_type: KvChoice = option(
        "auto",
        "precision of the keys and values llama.cpp caches for drafts: auto (f32 below 1B parameters, f16 above), "
        "f32 (exact to float rounding) or f16 (half the memory)",
    )
    # The torch backend (Hugging Face checkpoint folders as models.draft).
    device: str = option("auto", "torch device for checkpoint folders: auto, cpu, cuda or cuda:N", not_empty)
    dtype: str = option(
        "auto",
        "torch compute dtype: auto (bf16/fp16 on CUDA, fp32 on CPU), fp32, bf16, fp16",
        one_of("auto", "fp32", "bf16", "fp16"),
    )
    # The backend reads "auto" as none: the service resolves it against the catalogue entry first.
    quantization: str = option(
        "auto",
        "bitsandbytes quantization of checkpoints: auto (the catalogue entry's, else none), none, nf4 or int8",
        one_of("auto", "none", "nf4", "int8"),
    )
    offload: bool = option(True, "let layers that do not fit on the GPU run from CPU memory")
    max_gpu_memory_gib: float = option(0.0, "GPU memory the weights may take; 0 is what is free", at_least(0.0))
    # llama.cpp layers offloaded to the GPU (-1: all, where the build can offload at all). Not an option of
    # its own: the config's ar.n_gpu_layers serves both engines.
    n_gpu_layers: int = -1

    @classmethod
    def copied_from(cls, source: Any, **changes: Any) -> DiffusionLoadSettings:
        """These settings read by name from `source` (the config's [diffusion] section), then `changes`."""
        values = {item.name: getattr(source, item.name) for item in dataclasses.fields(cls)}
        return cls(**(values | changes))
