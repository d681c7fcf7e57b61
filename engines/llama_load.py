"""Open a GGUF with llama.cpp, turning its refusals into ModelLoadError with llama.cpp's own reason."""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import llama_cpp
from llama_cpp import _internals

from engines import llama_log
from engines.errors import ModelLoadError
from engines.threads import cpu_load, threads_for
from models.gguf_info import GGUFInfo

KvType = Literal["f16", "f32"]
GGML_TYPES: dict[KvType, int] = {"f32": 0, "f16": 1}  # ggml_type


@dataclass(frozen=True)
class ContextShape:
    n_ctx: int
    n_batch: int
    n_ubatch: int
    n_threads: int = 0  # 0: engines.threads chooses per call
    n_gpu_layers: int = -1  # -1: every layer, where this build can offload at all
    seed: int = 0
    # The keys and values the cache keeps: llama.cpp's default f16, or f32 (exact to float rounding).
    kv_type: KvType = "f16"


def gpu_offload_available() -> bool:
    """Whether this llama.cpp build can put layers on a GPU at all."""
    return bool(llama_cpp.llama_supports_gpu_offload())


def use_threads(llama: llama_cpp.Llama, threads: int) -> None:
    """Run this context's next evaluations (prompt batches and generation alike) on `threads` threads."""
    llama_cpp.llama_set_n_threads(llama._ctx.ctx, threads, threads)


def open_llama(
    info: GGUFInfo,
    shape: ContextShape,
    hint: str,
    *,
    lora: Path | None = None,
    overrides: dict[str, bool | int | float | str] | None = None,
) -> llama_cpp.Llama:
    """Load `info.path` with llama.cpp; `hint` ends the error message if llama.cpp refuses the file.
    `lora`: a LoRA adapter GGUF applied at load; `overrides`: metadata values read in place of the file's."""
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
            lora_path=None if lora is None else str(lora),
            kv_overrides=overrides,
            type_k=GGML_TYPES[shape.kv_type],
            type_v=GGML_TYPES[shape.kv_type],
            verbose=False,
        )
    except (ValueError, RuntimeError, OSError) as error:
        reasons = "; ".join(llama_log.recent_problems()[-3:]) or str(error)
        what = f"this {info.architecture!r} model" + ("" if lora is None else f" with the adapter {lora.name}")
        raise ModelLoadError(f"{info.path}: llama.cpp could not load {what} ({reasons}). {hint}") from error


def hold_sequences(llama: llama_cpp.Llama, sequences: int) -> None:
    """Give `llama` a context whose one KV cache (unified) holds `sequences` sequences that may share cells,
    in place of the one-sequence context llama-cpp-python's constructor makes; its LoRA adapter is set
    on the new context as it was on the old."""
    params = llama.context_params
    params.n_seq_max = sequences
    params.kv_unified = True
    llama._ctx.close()  # its KV cache is freed before the new one is allocated
    try:
        context = _internals.LlamaContext(model=llama._model, params=params, verbose=False)
    except ValueError as error:
        llama.close()
        raise ModelLoadError(f"llama.cpp could not make a context of {sequences} sequences ({error})") from error
    llama._ctx = context
    if llama._lora_adapter is not None:
        adapters = (llama_cpp.llama_adapter_lora_p_ctypes * 1)(llama._lora_adapter)  # type: ignore[misc]
        scales = (ctypes.c_float * 1)(llama.lora_scale)
        if llama_cpp.llama_set_adapters_lora(context.ctx, adapters, 1, scales):
            raise ModelLoadError(f"llama.cpp could not apply the adapter {llama.lora_path} to a new context")
