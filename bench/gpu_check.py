"""The GPU check: 256-token diffusion drafts under each cache mode against AR, at LLaDA-8B's, SDAR-8B's and a
1.5B shape, in plain torch, fitting one short command.

What it imports: the standard library, torch, and this repository's models/transformer.py (the torch backend's
own transformer), which imports only torch and models/transformer_spec.py (the standard library). No gguf,
llama_cpp, numpy, platformdirs or tomli-w; nothing to download or build.

Random weights of each shape are made on the device (bf16 on CUDA, fp32 with --cpu). One decoding loop of
its own drafts N = 256 tokens after a 192-token prompt in K = N / --tokens-per-pass passes, block by block
(blocks aligned to the sequence start), greedy by confidence; AR decodes the same N tokens one step at a
time with a KV cache through the same weights (causal attention). Cache modes:
  none    every pass decodes the whole sequence (block-causal models under their block-causal mask)
  prefix  a block's first pass decodes the whole sequence; later passes decode from the block to the end
          against the keys and values before it (Fast-dLLM's prefix cache)
  dual    as prefix, and later passes decode the block alone between the cached keys and values before
          and after it (Fast-dLLM's DualCache)
  block   block-causal models: a block decodes against the settled blocks' keys and values; a settled
          block rides along with the next block's first pass to add its own
Bidirectional models (LLaDA) run none, prefix and dual; block-causal ones (SDAR, Fast-dLLM v2) none and block.
Timings only: random weights say nothing of quality.

It measures the device first (memory bandwidth, matrix throughput, per-layer launch cost), estimates its own
run time, and keeps to --budget seconds: fewer repeats, then fewer layers of the real width (the table
says so), and a row that would still overrun is skipped and marked. Prints one table and writes it to
gpu_check.md under --out (default: $OUT if set, else /tmp/sharpen-gpu-check).
  bash bench/gpu_check.sh            # on a CUDA machine (one command, under 5 minutes)
  bash bench/gpu_check.sh --cpu      # tiny shapes on the CPU: a check of the script itself
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

# torch without numpy (a bare CUDA image may lack it) warns once as it loads; nothing here needs numpy.
warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
import torch  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from models.transformer import DiffusionTransformer, LayerKV, Rotary, block_causal_mask  # noqa: E402
from models.transformer_spec import TransformerSpec  # noqa: E402

WEIGHT_STD = 0.02
MODES_BIDIRECTIONAL = ("none", "prefix", "dual")
MODES_BLOCK_CAUSAL = ("none", "block")
GIB = 2**30


@dataclass(frozen=True)
class Shape:
    name: str
    spec: TransformerSpec
    block: int  # the draft's block length (block-causal models: the trained one)
    full_layers: int  # the real model's layer count (spec.layers may be fewer to fit the budget)

    @property
    def modes(self) -> tuple[str, ...]:
        return MODES_BLOCK_CAUSAL if self.spec.block_causal_length else MODES_BIDIRECTIONAL

    @property
    def label(self) -> str:
        if self.spec.layers == self.full_layers:
            return self.name
        return f"{self.name} ({self.spec.layers} of {self.full_layers} layers)"


def real_shapes() -> list[Shape]:
    """The published configurations (config.json of each model's Hugging Face repository)."""
    llada = TransformerSpec(
        architecture="llada", vocab_size=126464, width=4096, layers=32, heads=32, kv_heads=32, ffn=12288,
        rope_theta=500000.0, norm_eps=1e-5, qkv_bias=False, tied_output=False, shift_logits=False,
        mask_token_id=126336, context_length=4096,
    )  # fmt: skip
    sdar = TransformerSpec(
        architecture="sdar", vocab_size=151936, width=4096, layers=36, heads=32, kv_heads=8, ffn=12288,
        rope_theta=1000000.0, norm_eps=1e-6, qkv_bias=False, tied_output=False, shift_logits=False,
        mask_token_id=151669, context_length=32768, explicit_head_dim=128, qk_norm=True, block_causal_length=4,
    )  # fmt: skip
    fast = TransformerSpec(
        architecture="fast_dllm_v2", vocab_size=151936, width=1536, layers=28, heads=12, kv_heads=2, ffn=8960,
        rope_theta=1000000.0, norm_eps=1e-6, qkv_bias=True, tied_output=True, shift_logits=True,
        mask_token_id=151665, context_length=32768, block_causal_length=32,
    )  # fmt: skip
    return [
        Shape("LLaDA-8B", llada, 32, llada.layers),
        Shape("SDAR-8B", sdar, 4, sdar.layers),
        Shape("Fast-dLLM v2 1.5B", fast, 32, fast.layers),
    ]


def tiny(shape: Shape) -> Shape:
    """The same architecture at a toy size (--cpu): width 64, 2 layers, a 512-token vocabulary."""
    spec = shape.spec
    heads, kv_heads = 4, 4 if spec.kv_heads == spec.heads else 2
    small = replace(
        spec,
        vocab_size=512,
        width=64,
        layers=2,
        heads=heads,
        kv_heads=kv_heads,
        ffn=128,
        mask_token_id=511,
        explicit_head_dim=16 if spec.explicit_head_dim else 0,
        block_causal_length=min(spec.block_causal_length, 8),
    )
    return Shape(shape.name + " (tiny)", small, min(shape.block, 8), small.layers)


# ----- the device --------------------------------------------------------------------------------------


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(device: torch.device, run: Callable[[], object]) -> float:
    sync(device)
    started = time.perf_counter()
    run()
    sync(device)
    return time.perf_counter() - started


@dataclass(frozen=True)
class DeviceSpeed:
    bytes_per_s: float  # memory bandwidth: reading weights
    flops: float  # matrix products in the compute dtype
    layer_overhead_s: float  # launch and Python cost of one layer of one forward, whatever its size


def measure_device(device: torch.device, dtype: torch.dtype, probe: TransformerSpec) -> DeviceSpeed:
    side = 4096 if device.type == "cuda" else 512
    a = torch.randn(side, side, device=device, dtype=dtype)
    timed(device, lambda: a @ a)  # the first product loads the kernels
    matmul_s = min(timed(device, lambda: a @ a) for _ in range(3))
    elements = (256 if device.type == "cuda" else 16) * 2**20
    buffer = torch.empty(elements, device=device, dtype=dtype)
    buffer.fill_(1)
    copy_s = min(timed(device, lambda: buffer.clone()) for _ in range(3))
    model = make_model(probe, device, dtype)
    tokens = torch.zeros(1, 8, dtype=torch.long, device=device)
    positions = torch.arange(8, device=device)
    timed(device, lambda: model(tokens, positions))
    forward_s = min(timed(device, lambda: model(tokens, positions)) for _ in range(3))
    return DeviceSpeed(
        bytes_per_s=2 * elements * dtype.itemsize / copy_s,
        flops=2 * side**3 / matmul_s,
        layer_overhead_s=forward_s / probe.layers,
    )


def describe_device(device: torch.device) -> str:
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        return f"{props.name}, {props.total_memory / GIB:.0f} GiB, CUDA {torch.version.cuda}, torch {torch.__version__}"
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return f"CPU ({platform.processor() or platform.machine()}, {cores} cores), torch {torch.__version__}"


# ----- the model ---------------------------------------------------------------------------------------


def make_model(
    spec: TransformerSpec, device: torch.device, dtype: torch.dtype, std: float = WEIGHT_STD
) -> DiffusionTransformer:
    """Random weights of `spec`'s shape, allocated on `device` in `dtype` (never in fp32 first)."""
    with torch.device("meta"):
        model = DiffusionTransformer(spec).to(dtype)
    model = model.to_empty(device=device)
    generator = torch.Generator(device=device).manual_seed(0)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if parameter.dim() >= 2:
                parameter.normal_(0.0, std, generator=generator)
            elif name.endswith("bias"):
                parameter.zero_()
            else:
                parameter.fill_(1.0)  # norms
    # to_empty leaves buffers uninitialised: the rotary table again, in fp32 as the module keeps it.
    model.rotary.register_buffer("inverse", Rotary(spec.head_dim, spec.rope_theta).inverse.to(device), persistent=False)
    return model.eval()


def parameter_bytes(spec: TransformerSpec, dtype: torch.dtype) -> int:
    kv = spec.kv_heads * spec.head_dim
    layer = spec.width * (spec.attention_width * 2 + kv * 2) + 3 * spec.width * spec.ffn
    output = 0 if spec.tied_output else spec.vocab_size * spec.width
    return (spec.layers * layer + output + spec.vocab_size * spec.width) * dtype.itemsize


# ----- decoding loops ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Draft:
    prompt: int
    n: int
    tokens_per_pass: int

    def passes(self, block: int) -> int:
        return (self.n // block) * math.ceil(block / self.tokens_per_pass)


def _cat(first: list[LayerKV], second: list[LayerKV]) -> list[LayerKV]:
    return [
        LayerKV(torch.cat((a.keys, b.keys), dim=2), torch.cat((a.values, b.values), dim=2))
        for a, b in zip(first, second, strict=True)
    ]


def _slice(kv: list[LayerKV], start: int, end: int | None = None) -> list[LayerKV]:
    return [LayerKV(layer.keys[:, :, start:end], layer.values[:, :, start:end]) for layer in kv]


def ar_decode(model: DiffusionTransformer, prompt: torch.Tensor, n: int) -> torch.Tensor:
    """N tokens, greedy, one step each: the prompt under a causal mask, then one token at a time against the
    growing KV cache."""
    device, length = prompt.device, prompt.shape[1]
    causal = torch.ones(length, length, dtype=torch.bool, device=device).tril()
    positions = torch.arange(length + n, device=device)
    hidden, kv = model(prompt, positions[:length], mask=causal)
    token = model.logits(hidden[:, -1:]).argmax(-1)
    out = [token]
    for step in range(1, n):
        at = length + step - 1
        hidden, own = model(token, positions[at : at + 1], context=kv)
        kv = _cat(kv, own)
        token = model.logits(hidden).argmax(-1)
        out.append(token)
    return torch.cat(out, dim=1)


def _unmask(model: DiffusionTransformer, hidden: torch.Tensor, canvas: torch.Tensor, start: int, count: int) -> None:
    """Fill the `count` most confident masked positions of the block at `start` (hidden: the block's rows)."""
    confidence, predicted = model.logits(hidden[0]).float().softmax(-1).max(-1)
    block = canvas[0, start : start + hidden.shape[1]]
    confidence = confidence.masked_fill(block != model.spec.mask_token_id, -1.0)
    chosen = confidence.topk(count).indices
    block[chosen] = predicted[chosen]


def diffusion_decode(
    model: DiffusionTransformer, prompt: torch.Tensor, draft: Draft, block: int, mode: str
) -> torch.Tensor:
    """A draft of draft.n tokens in blocks of `block`, `draft.tokens_per_pass` settled a pass, under `mode`."""
    device, p, spec = prompt.device, prompt.shape[1], model.spec
    total = p + draft.n
    canvas = torch.cat((prompt, torch.full((1, draft.n), spec.mask_token_id, device=device)), dim=1)
    positions = torch.arange(total, device=device)
    full_mask = block_causal_mask(total, spec.block_causal_length, device) if spec.block_causal_length else None
    settled: list[LayerKV] = []
    if mode == "block":
        _, settled = model(prompt, positions[:p], mask=block_causal_mask(p, block, device))
    for start in range(p, total, block):
        end = start + block
        cached: list[LayerKV] = []
        for pass_index, settled_before in enumerate(range(0, block, draft.tokens_per_pass)):
            count = min(draft.tokens_per_pass, block - settled_before)
            if mode == "none" or (mode in ("prefix", "dual") and pass_index == 0):
                hidden, kv = model(canvas, positions, mask=full_mask)
                rows = hidden[:, start:end]
                if mode != "none":
                    cached = _slice(kv, 0, start) if mode == "prefix" else _cat(_slice(kv, 0, start), _slice(kv, end))
            elif mode == "prefix":
                rows = model(canvas[:, start:], positions[start:], context=cached)[0][:, :block]
            elif mode == "dual":
                rows = model(canvas[:, start:end], positions[start:end], context=cached)[0]
            elif pass_index == 0 and start > p:  # block: the settled block rides along
                keys = settled[0].keys.shape[2] + 2 * block
                ride = torch.ones(2 * block, keys, dtype=torch.bool, device=device)
                ride[:block, keys - block :] = False
                hidden, own = model(canvas[:, start - block : end], positions[start - block : end], settled, ride)
                settled = _cat(settled, _slice(own, 0, block))
                rows = hidden[:, block:]
            else:
                rows = model(canvas[:, start:end], positions[start:end], context=settled)[0]
            _unmask(model, rows, canvas, start, count)
    return canvas[:, p:]


# ----- planning and the table --------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    shape: Shape
    mode: str  # "AR" or a cache mode

    def passes(self, draft: Draft) -> int:
        return draft.n if self.mode == "AR" else draft.passes(self.shape.block)


def forward_seconds(spec: TransformerSpec, rows: int, keys: int, speed: DeviceSpeed, dtype: torch.dtype) -> float:
    """One forward of `rows` positions attending to `keys`: the weights read once, the products, the launches."""
    weights = parameter_bytes(spec, dtype)
    flops = weights / dtype.itemsize * 2 * rows + 4 * spec.layers * rows * keys * spec.attention_width
    return max(weights / speed.bytes_per_s + flops / speed.flops, spec.layers * speed.layer_overhead_s)


def estimate_row(row: Row, draft: Draft, speed: DeviceSpeed, dtype: torch.dtype) -> float:
    spec, block, total = row.shape.spec, row.shape.block, draft.prompt + draft.n
    prefill = forward_seconds(spec, draft.prompt, draft.prompt, speed, dtype)
    if row.mode == "AR":
        return prefill + draft.n * forward_seconds(spec, 1, total, speed, dtype)
    per_block = math.ceil(block / draft.tokens_per_pass)
    blocks = draft.n // block
    full = forward_seconds(spec, total, total, speed, dtype)
    later = {
        "none": full,
        "prefix": forward_seconds(spec, draft.n // 2 + block, total, speed, dtype),
        "dual": forward_seconds(spec, block, total, speed, dtype),
        "block": forward_seconds(spec, block, total // 2, speed, dtype),
    }[row.mode]
    first = forward_seconds(spec, 2 * block, total // 2, speed, dtype) if row.mode == "block" else full
    return (prefill if row.mode == "block" else 0.0) + blocks * (first + (per_block - 1) * later)


def estimate_shape(shape: Shape, draft: Draft, speed: DeviceSpeed, dtype: torch.dtype, repeats: int) -> float:
    """Making the weights, one warm-up draft of two blocks per row, and `repeats` timed runs of every row."""
    rows = [Row(shape, mode) for mode in ("AR", *shape.modes)]
    making = 3 * parameter_bytes(shape.spec, dtype) / speed.bytes_per_s
    warm = replace(draft, n=2 * shape.block)
    warm_up = sum(estimate_row(row, warm, speed, dtype) for row in rows)
    return making + warm_up + repeats * sum(estimate_row(row, draft, speed, dtype) for row in rows)


@dataclass(frozen=True)
class Plan:
    shapes: list[Shape]
    repeats: int
    estimate_s: float
    notes: list[str]


def plan(
    shapes: list[Shape],
    draft: Draft,
    speed: DeviceSpeed,
    dtype: torch.dtype,
    repeats: int,
    budget_s: float,
    memory_bytes: int | None,
) -> Plan:
    """The most repeats (up to `repeats`), then the most layers, whose estimate keeps within `budget_s`."""
    notes: list[str] = []
    if memory_bytes is not None:  # weights plus room for activations and caches
        fitted = []
        for shape in shapes:
            spec = shape.spec
            per_layer = parameter_bytes(replace(spec, layers=1), dtype) - parameter_bytes(
                replace(spec, layers=0), dtype
            )
            fixed = parameter_bytes(replace(spec, layers=0), dtype)
            layers = min(spec.layers, int((0.8 * memory_bytes - fixed) // per_layer))
            if layers < spec.layers:
                notes.append(f"{shape.name}: {layers} of {spec.layers} layers fit the device's memory")
            fitted.append(replace(shape, spec=replace(spec, layers=max(layers, 1))))
        shapes = fitted

    def total(chosen: list[Shape], reps: int) -> float:
        return sum(estimate_shape(shape, draft, speed, dtype, reps) for shape in chosen)

    for reps in range(repeats, 0, -1):
        if total(shapes, reps) <= budget_s:
            return Plan(shapes, reps, total(shapes, reps), notes)
    full, scaled = total(shapes, 1), shapes
    while total(scaled, 1) > budget_s and any(s.spec.layers > 1 for s in scaled):
        # The output layer and the embeddings stay whole, so the time does not fall in proportion: cut again.
        scale = min(0.9, budget_s / total(scaled, 1))
        scaled = [replace(s, spec=replace(s.spec, layers=max(1, int(s.spec.layers * scale)))) for s in scaled]
    notes.append(f"layers cut (estimate {full:.0f} s for every layer) to keep within {budget_s:.0f} s")
    return Plan(scaled, 1, total(scaled, 1), notes)


@dataclass(frozen=True)
class Result:
    row: Row
    passes: int
    seconds: float | None  # None: skipped
    ar_seconds: float | None
    note: str = ""


HEADER = "| shape | decoding | block | N | passes | s | tokens/s | x AR's speed |"


def table(results: list[Result], draft: Draft) -> list[str]:
    lines = [HEADER, "|---|---|---|---|---|---|---|---|"]
    for result in results:
        row = result.row
        decoding = "AR, KV cache" if row.mode == "AR" else f"diffusion, {row.mode} cache"
        block = "-" if row.mode == "AR" else str(row.shape.block)
        if result.seconds is None:
            figures = f"{result.note} | - | -"
        else:
            speed = "-" if result.ar_seconds is None else f"{result.ar_seconds / result.seconds:.2f}"
            figures = f"{result.seconds:.3f} | {draft.n / result.seconds:.1f} | {speed}"
        lines.append(f"| {row.shape.label} | {decoding} | {block} | {draft.n} | {result.passes} | {figures} |")
    return lines


def run_row(model: DiffusionTransformer, row: Row, prompt: torch.Tensor, draft: Draft, repeats: int) -> list[float]:
    device = prompt.device
    if row.mode == "AR":
        return [timed(device, lambda: ar_decode(model, prompt, draft.n)) for _ in range(repeats)]
    return [
        timed(device, lambda: diffusion_decode(model, prompt, draft, row.shape.block, row.mode)) for _ in range(repeats)
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cpu", action="store_true", help="tiny shapes on the CPU in fp32: a check of the script")
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT") or "/tmp/sharpen-gpu-check"))
    parser.add_argument("--n", type=int, help="tokens a draft makes (default 256; 32 with --cpu)")
    parser.add_argument("--prompt", type=int, help="prompt tokens (default 192; 16 with --cpu)")
    parser.add_argument("--tokens-per-pass", type=int, default=2, help="tokens settled a pass: K = N / this")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per row at most (median)")
    parser.add_argument("--budget", type=float, default=240.0, help="seconds the measurements may take")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    if args.cpu:
        device, dtype, shapes = torch.device("cpu"), torch.float32, [tiny(s) for s in real_shapes()]
        draft = Draft(args.prompt or 16, args.n or 32, args.tokens_per_pass)
    else:
        if not torch.cuda.is_available():
            print("gpu_check: error: torch sees no CUDA device (--cpu runs tiny shapes on the CPU)", file=sys.stderr)
            return 2
        device, dtype, shapes = torch.device("cuda"), torch.bfloat16, real_shapes()
        draft = Draft(args.prompt or 192, args.n or 256, args.tokens_per_pass)
    for shape in shapes:
        if draft.n % shape.block or draft.prompt % shape.block:
            print(f"gpu_check: error: --n and --prompt must be multiples of {shape.block}", file=sys.stderr)
            return 2
    torch.set_grad_enabled(False)
    print(f"device: {describe_device(device)}", flush=True)
    speed = measure_device(device, dtype, tiny(shapes[0]).spec if not args.cpu else shapes[0].spec)
    print(
        f"measured: {speed.bytes_per_s / 1e9:.0f} GB/s, {speed.flops / 1e12:.1f} TFLOP/s ({dtype}), "
        f"{speed.layer_overhead_s * 1e6:.0f} us launch cost per layer",
        flush=True,
    )
    memory = torch.cuda.mem_get_info(device)[0] if device.type == "cuda" else None
    chosen = plan(shapes, draft, speed, dtype, args.repeats, args.budget, memory)
    print(f"estimate: {chosen.estimate_s:.0f} s for {chosen.repeats} repeat(s) of every row", flush=True)
    for note in chosen.notes:
        print(f"note: {note}", flush=True)

    deadline = started + args.budget + 30  # the estimate's margin; a row that would pass it is skipped
    results: list[Result] = []
    generator = torch.Generator(device="cpu").manual_seed(1)
    for shape in chosen.shapes:
        shape_started = time.perf_counter()
        model = make_model(shape.spec, device, dtype)
        vocab = shape.spec.vocab_size
        prompt = torch.randint(100, vocab - 1, (1, draft.prompt), generator=generator).to(device)
        rows = [Row(shape, mode) for mode in ("AR", *shape.modes)]
        warm = replace(draft, n=2 * shape.block)
        for row in rows:  # kernels load and pick their algorithms on first use
            run_row(model, row, prompt, warm, 1)
        ar_s: float | None = None
        for row in rows:
            expected = chosen.repeats * estimate_row(row, draft, speed, dtype)
            if time.perf_counter() + expected > deadline:
                results.append(Result(row, row.passes(draft), None, ar_s, f"skipped: {expected:.0f} s left no time"))
                continue
            seconds = statistics.median(run_row(model, row, prompt, draft, chosen.repeats))
            ar_s = seconds if row.mode == "AR" else ar_s
            results.append(Result(row, row.passes(draft), seconds, ar_s))
            print(f"  {shape.label}, {row.mode}: {seconds:.3f} s", flush=True)
        del model
        if device.type == "cuda":
            torch.cuda.empty_cache()
        print(f"{shape.label}: {time.perf_counter() - shape_started:.0f} s", flush=True)

    elapsed = time.perf_counter() - started
    lines = [
        f"device: {describe_device(device)}; {dtype}; random weights",
        f"N = {draft.n} after a {draft.prompt}-token prompt, {draft.tokens_per_pass} tokens a pass, greedy; "
        f"median of {chosen.repeats}; estimated {chosen.estimate_s:.0f} s, took {elapsed:.0f} s",
        *(f"note: {note}" for note in chosen.notes),
        "",
        *table(results, draft),
    ]
    print("\n" + "\n".join(lines))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "gpu_check.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"\nwritten: {args.out / 'gpu_check.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
