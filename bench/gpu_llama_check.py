"""The device check's figures: AR against block-causal diffusion on one GPU, on the same 135M weights.

A stand-in of SmolLM2-135M's shape (random weights at F16, SmolLM2's tokenizer) is written twice: as a
causal llama file for AR decoding and as a block-causal diffusion file (causal attention off, a mask token,
shifted logits, BLOCK_CAUSAL_KEY), both fully offloaded to the GPU by llama.cpp; the same weights as a
Hugging Face checkpoint for the torch backend on CUDA (bf16). N = 256 after a 200-token prompt, K = N/4,
greedy: seconds, tokens/s and speed as a multiple of AR's. Timings only: random weights say nothing of
quality. Run through bench/gpu_llama_check.sh on the device; `--cpu --layers 2 --n 32` runs it here as a check
of the script itself.
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np
from diffusion import ar_seconds, run_draft
from gguf import GGUFWriter
from hf_stand_in import dream_from_smollm2
from machine import describe_machine

from engines.diffusion.backend import CacheMode
from engines.diffusion.engine import DiffusionEngine
from engines.diffusion.llama_backend import LlamaDiffusionBackend
from engines.diffusion.load_settings import DiffusionLoadSettings
from engines.diffusion.settings import DiffusionSettings
from engines.llama_ar import LlamaAREngine, LlamaSettings
from models.gguf_info import BLOCK_CAUSAL_KEY

# SmolLM2-135M's shape.
VOCAB, WIDTH, HEADS, KV_HEADS, FFN = 49152, 576, 9, 3, 1536
MASK_TOKEN_ID = 16
PROMPT_TOKENS = 200


def write_stand_in(path: Path, tokenizer: dict[str, object], layers: int, *, diffusion: bool) -> Path:
    rng = np.random.default_rng(0)  # the same weights in both files

    def weight(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape, dtype=np.float32) * 0.02).astype(np.float16)

    writer = GGUFWriter(str(path), "llama")
    writer.add_name("smollm2-shape-stand-in")
    writer.add_context_length(2048)
    writer.add_embedding_length(WIDTH)
    writer.add_block_count(layers)
    writer.add_feed_forward_length(FFN)
    writer.add_head_count(HEADS)
    writer.add_head_count_kv(KV_HEADS)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_rope_dimension_count(WIDTH // HEADS)
    writer.add_rope_freq_base(100000.0)
    writer.add_vocab_size(VOCAB)
    writer.add_file_type(1)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("smollm")
    writer.add_token_list(tokenizer["tokenizer.ggml.tokens"])  # type: ignore[arg-type]
    writer.add_token_types(tokenizer["tokenizer.ggml.token_type"])  # type: ignore[arg-type]
    writer.add_token_merges(tokenizer["tokenizer.ggml.merges"])  # type: ignore[arg-type]
    writer.add_chat_template(str(tokenizer["tokenizer.chat_template"]))
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_add_bos_token(False)
    if diffusion:
        writer.add_bool("llama.attention.causal", False)
        writer.add_mask_token_id(MASK_TOKEN_ID)
        writer.add_bool("diffusion.shift_logits", True)
        writer.add_uint32(BLOCK_CAUSAL_KEY, 32)
    kv = WIDTH // HEADS * KV_HEADS
    writer.add_tensor("token_embd.weight", weight(VOCAB, WIDTH))
    writer.add_tensor("output_norm.weight", np.ones(WIDTH, dtype=np.float32))
    for layer in range(layers):
        block = f"blk.{layer}"
        writer.add_tensor(f"{block}.attn_norm.weight", np.ones(WIDTH, dtype=np.float32))
        writer.add_tensor(f"{block}.attn_q.weight", weight(WIDTH, WIDTH))
        writer.add_tensor(f"{block}.attn_k.weight", weight(kv, WIDTH))
        writer.add_tensor(f"{block}.attn_v.weight", weight(kv, WIDTH))
        writer.add_tensor(f"{block}.attn_output.weight", weight(WIDTH, WIDTH))
        writer.add_tensor(f"{block}.ffn_norm.weight", np.ones(WIDTH, dtype=np.float32))
        writer.add_tensor(f"{block}.ffn_gate.weight", weight(FFN, WIDTH))
        writer.add_tensor(f"{block}.ffn_up.weight", weight(FFN, WIDTH))
        writer.add_tensor(f"{block}.ffn_down.weight", weight(WIDTH, FFN))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tokenizer", type=Path, required=True, help="from bench/gpu_prepare.sh")
    parser.add_argument("--out", type=Path, default=Path("/tmp/sharpen-gpu-check"))
    parser.add_argument("--n", type=int, default=256)
    parser.add_argument("--layers", type=int, default=30)
    parser.add_argument("--blocks", default="4,8,16,32")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cpu", action="store_true", help="no offload, torch on the CPU: a check of the script")
    args = parser.parse_args()
    print(f"machine: {describe_machine()}")
    gpu_layers, device = (0, "cpu") if args.cpu else (-1, "cuda")
    with gzip.open(args.tokenizer, "rt", encoding="utf-8") as handle:
        tokenizer = json.load(handle)
    args.out.mkdir(parents=True, exist_ok=True)
    ar_path = write_stand_in(args.out / "ar.gguf", tokenizer, args.layers, diffusion=False)
    block_path = write_stand_in(args.out / "block.gguf", tokenizer, args.layers, diffusion=True)
    ar = LlamaAREngine(ar_path, "stand-in", LlamaSettings(n_ctx=1024, n_gpu_layers=gpu_layers))
    prompt = [int(t) for t in np.random.default_rng(1).integers(100, VOCAB, PROMPT_TOKENS)]
    n, steps = args.n, args.n // 4
    fixed = DiffusionSettings.reference(steps=steps, stop_at_eos=False)
    engines: dict[str, tuple[DiffusionEngine, DiffusionSettings]] = {}
    for kv_type in ("f16", "f32"):
        llama = LlamaDiffusionBackend(
            block_path, DiffusionLoadSettings(n_ctx=1024, n_gpu_layers=gpu_layers, cache="block", kv_type=kv_type)
        )
        for block in (int(b) for b in args.blocks.split(",")):
            label = f"llama.cpp, block-causal, blocks of {block}, {kv_type} KV"
            engines[label] = (DiffusionEngine(llama, label), replace(fixed, block_length=block))
    try:
        engines.update(torch_engines(ar_path, args.out / "hf", device, fixed))
    except Exception as error:  # the llama.cpp rows stand without torch's
        print(f"torch backend: {type(error).__name__}: {error}")

    for engine, settings in engines.values():  # warm-up: CUDA kernels load on first use
        run_draft(engine, prompt, min(n, 64), replace(settings, steps=min(steps, 16)), 10_000.0)
    ar_seconds(ar, prompt, 16)
    times: dict[str, list[float]] = {label: [] for label in ["AR", *engines]}
    for _ in range(args.repeats):
        times["AR"].append(ar_seconds(ar, prompt, n))
        for label, (engine, settings) in engines.items():
            times[label].append(run_draft(engine, prompt, n, settings, 10_000.0).wall_s)
    ar_s = statistics.median(times["AR"])
    print(f"\nN = {n} after a {PROMPT_TOKENS}-token prompt, K = {steps}, greedy, median of {args.repeats}")
    print("| engine | s | tokens/s | x AR's speed |")
    print("|---|---|---|---|")
    for label, seconds in times.items():
        median = statistics.median(seconds)
        print(
            f"| {'llama.cpp, AR' if label == 'AR' else label} | {median:.3f} | {n / median:.0f} | {ar_s / median:.2f} |"
        )


def torch_engines(
    source: Path, folder: Path, device: str, fixed: DiffusionSettings
) -> dict[str, tuple[DiffusionEngine, DiffusionSettings]]:
    from engines.diffusion.hf.backend import TorchDiffusionBackend

    checkpoint = dream_from_smollm2(source, folder)
    dtype = "bf16" if device == "cuda" else "fp32"
    engines = {}
    caches: tuple[tuple[CacheMode, int], ...] = (("dual", 32), ("block", 32), ("block", 8))
    for cache, block in caches:
        settings = DiffusionLoadSettings(device=device, dtype=dtype, cache=cache, n_ctx=1024)
        backend = TorchDiffusionBackend(checkpoint, settings)
        label = f"torch ({device}), {cache} cache, blocks of {block}"
        engines[label] = (DiffusionEngine(backend, label), replace(fixed, block_length=block))
    return engines


if __name__ == "__main__":
    main()
