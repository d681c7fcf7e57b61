"""Open a GGUF with llama.cpp, turning its refusals into ModelLoadError with llama.cpp's own reason."""

from __future__ import annotations

from dataclasses import dataclass

import llama_cpp

from engines import llama_log
from engines.errors import ModelLoadError
from engines.threads import cpu_load, threads_for
from models.gguf_info import GGUFInfo


@dataclass(frozen=True)
class ContextShape:
    n_ctx: int
    n_batch: int
    n_ubatch: int
    n_threads: int = 0  # 0: engines.threads chooses per call
    n_gpu_layers: int = -1  # -1: every layer, where this build can offload at all
    seed: int = 0


def gpu_offload_available() -> bool:
    """Whether this llama.cpp build can put layers on a GPU at all."""
    return bool(llama_cpp.llama_supports_gpu_offload())


def use_threads(llama: llama_cpp.Llama, threads: int) -> None:
    """Run this context's next evaluations (prompt batches and generation alike) on `threads` threads."""
    llama_cpp.llama_set_n_threads(llama._ctx.ctx, threads, threads)


def open_llama(info: GGUFInfo, shape: ContextShape, hint: str) -> llama_cpp.Llama:
    """Load `info.path` with llama.cpp; `hint` ends the error message if llama.cpp refuses the file."""
    threads = threads_for(shape.n_threads)
    cpu_load()  # starts sampling other work's load, so the first request already knows it
    llama_log.install()
    llama_log.clear()
    try:
        return llama_cpp.Llama(
            model_path=str(info.path),
            n_ctx=shape.n_ctx,
            n_batch=shape.n_batch,
            n_ubatch=shape.n_ubatch,
            n_threads=threads,
            n_threads_batch=threads,
            n_gpu_layers=shape.n_gpu_layers if gpu_offload_available() else 0,
            seed=shape.seed,
            verbose=False,
        )
    except (ValueError, RuntimeError, OSError) as error:
        reasons = "; ".join(llama_log.recent_problems()[-3:]) or str(error)
        raise ModelLoadError(
            f"{info.path}: llama.cpp could not load this {info.architecture!r} model ({reasons}). {hint}"
        ) from error
