"""Sharpen with its layers on llama.cpp's Vulkan backend against its CPU build: the same requests on the same
GGUFs with the same seed, greedy. Run by scripts/check-vulkan, which installs both builds.

  record OUT [--exact DIR]   run the requests through SharpenService on the llama.cpp this Python imports,
               every layer offloaded where the build can (ar.n_gpu_layers = -1), and write each request's tokens,
               and the inputs and logits of each llama.cpp call, to OUT/<request>.npz
  exact DIR    write F32 copies of the models into DIR: with them (and f32 keys and values) both backends
               compute in float32, so their logits can agree to the tolerance
  compare CPU OTHER [--shipped]   per request: equal tokens, or where they part, the logits there (both runs
               had the same input up to that call) and how far apart they are, with the likely cause

As shipped (quantized GGUFs) the two builds do not compute the same numbers: ggml-cpu multiplies Q4_1 and Q8_0
weights by activations quantized to 8 bits (Q8_1, Q8_0), the Vulkan backend by f16 or f32 ones, so one row's
logits differ by up to about 1 and greedy tokens part at near ties; `--shipped` reports that without a verdict.
The verdict is the exact run's: F32 weights, f32 keys and values, and Vulkan's f32 shaders (GGML_VK_DISABLE_F16).

Requests: two AR completions (a continuation and a chat reply, 64 tokens, on SmolLM2-135M-Instruct), a 64-token
draft under the dual cache (sharpen-draft-mini, bidirectional), a 64-token draft under the block cache
(sharpen-draft: SmolLM2 with its LoRA adapter, block-causal) and a rewrite of a selection (sharpen-draft).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import llama_cpp
import numpy as np

from app.domain.draft_request import DraftRequest
from app.service import SharpenService
from app.storage.config import load_config
from app.storage.paths import sharpen_paths
from engines.diffusion.llama_backend import LlamaDiffusionBackend
from engines.events import Done, Pass

TOKENS = 64
TOLERANCE = 1e-2
COMPLETE_MODEL = "smollm2-135m-instruct"
PREFIX = "The river wound through the valley, and the old mill stood at its bend. Every morning the miller"
INSTRUCTION = "Write a short paragraph about keeping bees in a city garden."
BEFORE = "Dear neighbours,\n\nThe garden meeting is on Thursday. "
SELECTION = "We would be really very glad if as many of you as possible could perhaps come along and help out."
AFTER = "\n\nBest wishes,\nSam"


@dataclass(frozen=True)
class Request:
    name: str
    draft_model: str
    cache: str
    run: Callable[[SharpenService], Iterator[Any]]


def _ar_requests() -> list[Request]:
    return [
        Request(
            "AR completion",
            "",
            "dual",
            lambda s: iter(s.complete(PREFIX, max_tokens=TOKENS, temperature=0.0, seed=0)),
        ),
        Request(
            "AR chat reply", "", "dual", lambda s: iter(s.chat(INSTRUCTION, max_tokens=TOKENS, temperature=0.0, seed=0))
        ),
    ]


def _draft(kind: str, **fields: Any) -> Callable[[SharpenService], Iterator[Any]]:
    overrides = {"temperature": 0.0, "seed": 0}

    def run(service: SharpenService) -> Iterator[Any]:
        request = DraftRequest(kind, tokens=TOKENS, engine="diffusion", overrides=overrides, **fields)  # type: ignore[arg-type]
        return iter(service.draft(request))

    return run


REQUESTS = [
    *_ar_requests(),
    Request("dual-cache draft", "sharpen-draft-mini", "dual", _draft("draft", instruction=INSTRUCTION)),
    Request("block-cache draft", "sharpen-draft", "block", _draft("draft", instruction=INSTRUCTION)),
    Request(
        "rewrite",
        "sharpen-draft",
        "block",
        _draft("infill", instruction="shorter", selection=SELECTION, before=BEFORE, after=AFTER),
    ),
]


# ----- record ----------------------------------------------------------------------------------------


class _Calls:
    """What llama.cpp computed for a request: the diffusion backend's logits calls (each one's input and the rows
    it returned), and the AR engine's last row after each evaluation (what the next token is chosen from)."""

    def __init__(self) -> None:
        self.inputs: list[np.ndarray] = []
        self.logits: list[np.ndarray] = []
        self.ar_rows: list[np.ndarray] = []
        self.ar_tokens: list[int] = []

    def clear(self) -> None:
        self.inputs.clear()
        self.logits.clear()
        self.ar_rows.clear()
        self.ar_tokens.clear()

    def install(self) -> None:
        diffusion_logits, evaluate, generate = (
            LlamaDiffusionBackend.logits,
            llama_cpp.Llama.eval,
            llama_cpp.Llama.generate,
        )
        calls = self

        def recorded(backend: LlamaDiffusionBackend, sequence: np.ndarray, start: int, end: int, stable: int) -> Any:
            rows = diffusion_logits(backend, sequence, start, end, stable)
            calls.inputs.append(np.asarray([start, end, *[int(t) for t in sequence]], dtype=np.int64))
            calls.logits.append(np.array(rows, dtype=np.float32))
            return rows

        def evaluated(llama: llama_cpp.Llama, tokens: Any) -> None:
            evaluate(llama, tokens)
            pointer = llama_cpp.llama_get_logits_ith(llama._ctx.ctx, -1)
            calls.ar_rows.append(np.ctypeslib.as_array(pointer, shape=(llama.n_vocab(),)).copy())

        def generating(llama: llama_cpp.Llama, *args: Any, **kwargs: Any) -> Iterator[int]:
            tokens = generate(llama, *args, **kwargs)
            try:
                for token in tokens:
                    calls.ar_tokens.append(int(token))
                    yield token
            finally:
                tokens.close()

        LlamaDiffusionBackend.logits = recorded  # type: ignore[method-assign,assignment]
        llama_cpp.Llama.eval = evaluated  # type: ignore[method-assign,assignment]
        llama_cpp.Llama.generate = generating  # type: ignore[method-assign,assignment]


# The exact run's F32 copies, by the model each stands for (exact DIR writes them).
EXACT_FILES = {COMPLETE_MODEL: "complete-f32.gguf", "sharpen-draft-mini": "draft-mini-f32.gguf"}
EXACT_MERGED = "sharpen-draft-merged-f32.gguf"  # sharpen-draft: SmolLM2 with its LoRA merged in, at F32


def _write_config(request: Request, exact: Path | None) -> None:
    config = sharpen_paths().config_file
    config.parent.mkdir(parents=True, exist_ok=True)
    complete, draft = COMPLETE_MODEL, request.draft_model or "sharpen-draft"
    kv_type = "f16"
    if exact is not None:
        complete = str(exact / EXACT_FILES[complete])
        draft = str(exact / EXACT_FILES.get(draft, EXACT_MERGED))
        kv_type = "f32"
    lines = [
        "[models]",
        f"complete = {json.dumps(complete)}",
        f"draft = {json.dumps(draft)}",
        "[ar]",
        "n_gpu_layers = -1",
        f'kv_type = "{kv_type}"',
        "[diffusion]",
        f'cache = "{request.cache}"',
        *([f'kv_type = "{kv_type}"'] if exact is not None else []),
        "[router]",
        "auto_calibrate = false",
    ]
    config.write_text("\n".join(lines) + "\n", encoding="utf-8")


def write_exact_models(folder: Path) -> None:
    """F32 copies of the requests' models, and sharpen-draft's adapter merged into the F32 copy of its base."""
    from models.adapted import AdaptedModel, adapter_info, base_as_diffusion, verify_base, write_merged_file
    from models.catalogue import resolve_model

    folder.mkdir(parents=True, exist_ok=True)
    for name, file in EXACT_FILES.items():
        _write_f32_copy(resolve_model(name).path, folder / file)
    adapter = adapter_info(resolve_model("sharpen-draft").path)
    verify_base(resolve_model(COMPLETE_MODEL).path, adapter)  # the copy is of the adapter's own base
    base = folder / EXACT_FILES[COMPLETE_MODEL]
    write_merged_file(AdaptedModel(base, adapter, base_as_diffusion(base, adapter)), folder / EXACT_MERGED, "F32")


def _write_f32_copy(source: Path, target: Path) -> None:
    from gguf import GGUFReader, GGUFValueType, GGUFWriter
    from gguf.quants import dequantize

    reader = GGUFReader(source)
    writer = GGUFWriter(str(target), str(reader.fields["general.architecture"].contents()))
    for key, field in reader.fields.items():
        if key.startswith("GGUF.") or key in ("general.architecture", "general.file_type"):
            continue
        kind = field.types[0]
        writer.add_key_value(key, field.contents(), kind, field.types[-1] if kind == GGUFValueType.ARRAY else None)
    for tensor in reader.tensors:
        writer.add_tensor(tensor.name, np.asarray(dequantize(tensor.data, tensor.tensor_type), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def record(out: Path, exact: Path | None = None) -> None:
    calls = _Calls()
    calls.install()
    out.mkdir(parents=True, exist_ok=True)
    summary: dict[str, Any] = {}
    for request in REQUESTS:
        _write_config(request, exact)
        service = SharpenService(load_config(sharpen_paths().config_file), sharpen_paths())
        calls.clear()
        canvases: list[tuple[int, ...]] = []
        for event in request.run(service):
            if isinstance(event, Pass):
                canvases.append(event.canvas)
            elif isinstance(event, Done) and event.stats.finish_reason not in ("length", "eos", "stop"):
                raise SystemExit(f"{request.name}: ended {event.stats.finish_reason}")
        arrays: dict[str, np.ndarray] = {}
        if canvases:
            tokens = list(canvases[-1])
            backend = service.engines.diffusion().backend
            mode = getattr(backend, "_mode", "?")
            arrays["mask"] = np.asarray([backend.mask_token_id], dtype=np.int64)
            for index, (given, rows) in enumerate(zip(calls.inputs, calls.logits, strict=True)):
                arrays[f"input_{index}"], arrays[f"logits_{index}"] = given, rows
        else:
            mode, tokens = "AR", list(calls.ar_tokens)
            # Step i chose its token from the row after evaluation i (the prompt, then each token in turn).
            for index, row in enumerate(calls.ar_rows[: len(tokens)]):
                arrays[f"input_{index}"] = np.asarray([index, *tokens[:index]], dtype=np.int64)
                arrays[f"logits_{index}"] = row
        calls_made = sum(key.startswith("logits_") for key in arrays)
        arrays["tokens"] = np.asarray(tokens, dtype=np.int64)
        np.savez(out / f"{_slug(request.name)}.npz", **cast(dict[str, Any], arrays))
        summary[request.name] = {"tokens": len(tokens), "calls": calls_made, "cache": mode}
        print(f"{request.name}: {len(tokens)} tokens, {calls_made} llama.cpp calls, {mode}", flush=True)
    (out / "summary.json").write_text(json.dumps(summary, indent=1), encoding="utf-8")


def _slug(name: str) -> str:
    return name.lower().replace(" ", "-")


# ----- compare ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Comparison:
    name: str
    tokens: int
    equal: bool
    # Over every llama.cpp call both runs made with the same input: the largest difference of one logit.
    max_diff: float
    calls_compared: int
    # Where the runs part: the position (in the draft or the completion), the largest logit difference in the
    # rows of the last call both made with the same input (the one whose logits decided differently), and on
    # the CPU's logits the margin between the two runs' tokens at that position (None: one run left it masked).
    first_position: int | None = None
    diff_there: float | None = None
    margin_there: float | None = None

    @property
    def passed(self) -> bool:
        return self.equal or (self.diff_there is not None and self.diff_there <= TOLERANCE)

    def result(self, verdict: bool) -> str:
        if not verdict:
            return "-"
        return "pass" if self.passed else "FAIL"

    def cause(self) -> str:
        if self.equal:
            return "-"
        if self.diff_there is None:
            return "no call with equal input: the runs differ from their first llama.cpp call"
        if self.margin_there is None:
            return (
                "which position settles first: two positions' confidences are closer than the backends' rounding"
                if self.diff_there <= TOLERANCE
                else "which position settles first, after logits that differ beyond the tolerance"
            )
        if self.margin_there <= 2 * self.diff_there:
            return (
                f"a near tie: the two tokens' logits are {self.margin_there:.2g} apart on the CPU, within the "
                "backends' rounding"
            )
        return "the logits differ by more than the margin between the tokens: a backend difference, not a tie"


def _parted(a: np.ndarray, b: np.ndarray) -> int | None:
    """The first index where two sequences differ (the shorter one's length where one continues the other)."""
    for index, (x, y) in enumerate(zip(a.tolist(), b.tolist(), strict=False)):
        if x != y:
            return index
    return None if len(a) == len(b) else min(len(a), len(b))


def compare_request(name: str, cpu: Path, other: Path) -> Comparison:
    a, b = np.load(cpu), np.load(other)
    tokens_a, tokens_b = a["tokens"], b["tokens"]
    parted = _parted(tokens_a, tokens_b)
    max_diff, compared = 0.0, 0
    while f"input_{compared}" in a and f"input_{compared}" in b:
        given_a, given_b = a[f"input_{compared}"], b[f"input_{compared}"]
        if _parted(given_a, given_b) is not None:
            break
        max_diff = max(max_diff, float(np.abs(a[f"logits_{compared}"] - b[f"logits_{compared}"]).max()))
        compared += 1
    if parted is None:
        return Comparison(name, len(tokens_a), True, max_diff, compared)
    if compared == 0:
        return Comparison(name, len(tokens_a), False, max_diff, compared, parted)
    last = compared - 1
    given, rows_a, rows_b = a[f"input_{last}"], a[f"logits_{last}"], b[f"logits_{last}"]
    if rows_a.ndim == 1:  # AR: the row that chose the first differing token
        row_a, row_b = rows_a, rows_b
        token_a = int(tokens_a[parted]) if parted < len(tokens_a) else None
        token_b = int(tokens_b[parted]) if parted < len(tokens_b) else None
    else:  # diffusion: the window's rows; the next inputs (or the drafts) show which position settled differently
        start, sequence = int(given[0]), given[2:]
        key = f"input_{compared}"
        if key in a and key in b:
            next_a, next_b = a[key][2:], b[key][2:]
            where = _parted(next_a, next_b)
            seq_position = start if where is None else where
        else:
            next_a = next_b = sequence
            seq_position = start + parted
        row = min(max(seq_position - start, 0), len(rows_a) - 1)
        row_a, row_b = rows_a[row], rows_b[row]
        first_start = int(a["input_0"][0])
        parted = seq_position - first_start
        mask = int(a["mask"][0])
        token_a = int(next_a[seq_position]) if seq_position < len(next_a) else None
        token_b = int(next_b[seq_position]) if seq_position < len(next_b) else None
        if mask in (token_a, token_b):
            token_a = token_b = None  # one run left it masked: the order of settling differs, not the token
    diff_there = float(np.abs(row_a - row_b).max())
    margin = None if token_a is None or token_b is None else abs(float(row_a[token_a] - row_a[token_b]))
    return Comparison(name, len(tokens_a), False, max_diff, compared, parted, diff_there, margin)


def compare(cpu: Path, other: Path) -> list[Comparison]:
    return [compare_request(r.name, cpu / f"{_slug(r.name)}.npz", other / f"{_slug(r.name)}.npz") for r in REQUESTS]


def table(comparisons: list[Comparison], verdict: bool = True) -> list[str]:
    lines = [
        "| request | tokens | same tokens | llama.cpp calls with equal input | max logit diff over them | "
        "first differing position | logit diff there | result | cause |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for c in comparisons:
        position = "-" if c.first_position is None else str(c.first_position)
        there = "-" if c.diff_there is None else f"{c.diff_there:.2g}"
        result = c.result(verdict)
        lines.append(
            f"| {c.name} | {c.tokens} | {'yes' if c.equal else 'no'} | {c.calls_compared} | {c.max_diff:.2g} | "
            f"{position} | {there} | {result} | {c.cause()} |"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    recording = commands.add_parser("record")
    recording.add_argument("out", type=Path)
    recording.add_argument("--exact", type=Path, help="the folder `exact` wrote: run on its F32 models")
    commands.add_parser("exact").add_argument("folder", type=Path)
    both = commands.add_parser("compare")
    both.add_argument("cpu", type=Path)
    both.add_argument("other", type=Path)
    both.add_argument("--shipped", action="store_true", help="quantized models: report, without a verdict")
    args = parser.parse_args(argv)
    if args.command == "record":
        if not os.environ.get("SHARPEN_HOME"):
            parser.error("record writes its own config: set SHARPEN_HOME to an empty folder")
        record(args.out, args.exact)
        return 0
    if args.command == "exact":
        write_exact_models(args.folder)
        return 0
    comparisons = compare(args.cpu, args.other)
    print("\n".join(table(comparisons, verdict=not args.shipped)))
    return 0 if args.shipped or all(c.passed for c in comparisons) else 1


if __name__ == "__main__":
    sys.exit(main())
