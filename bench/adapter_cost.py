"""What the embedded drafter's LoRA adapter costs per pass, against merging it into the base.

The adapted drafter (models/adapted.py) runs SmolLM2-135M's Q4_1 file with a rank-32 LoRA applied at
load. llama.cpp then computes each adapted matrix as W·x + B·(A·x): two small extra products per
matrix. Merging instead (W + B·A, written once at first run) costs nothing per pass but needs a copy of
the base, and requantizing the merged weights loses part of the update. This prints, side by side in
one run, seconds per pass (median: a cached dual-cache pass; mean: with each block's full first pass)
for base + adapter and for the merged weights at Q8_0 and at Q4_1 (Q4_1 computes as the base alone
does), and how many of the adapter's greedy draft words each merged file reproduces in place.

    .venv/bin/python bench/adapter_cost.py [--adapter models/embedded/sharpen-draft-lora.gguf] [--prompts 4]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import training_path  # noqa: F401  (training/ importable)
from machine import describe_machine

from engines.diffusion.engine import DiffusionEngine
from engines.diffusion.llama_backend import LlamaDiffusionBackend
from engines.diffusion.load_settings import DiffusionLoadSettings
from engines.diffusion.settings import DiffusionSettings
from engines.events import Done
from models.adapted import AdaptedModel, adapter_info, base_as_diffusion, verify_base, write_merged_file
from models.catalogue import resolve_model
from training.open_prompts import open_instructions

N = 128


def timed_draft(engine: DiffusionEngine, prompt: str) -> tuple[list[float], str]:
    """Seconds of each pass of a K = N/4 draft, and its text."""
    settings = DiffusionSettings.reference(steps=N // 4, block_length=32)
    stamps, text = [time.perf_counter()], ""
    for event in engine.draft(prompt, N, settings):
        stamps.append(time.perf_counter())
        if isinstance(event, Done):
            text = event.text
    return list(np.diff(stamps)), text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--adapter", type=Path, default=Path("models/embedded/sharpen-draft-lora.gguf"))
    parser.add_argument("--prompts", type=int, default=4)
    args = parser.parse_args()
    base = resolve_model("smollm2-135m-instruct").path
    info = adapter_info(args.adapter)
    verify_base(base, info)
    model = AdaptedModel(base, info, base_as_diffusion(base, info))
    prompts = [i.text for i in open_instructions(args.prompts, quoted=[], held_out=True)]
    print(f"machine: {describe_machine()}")
    with tempfile.TemporaryDirectory() as folder:
        started = time.perf_counter()
        q8 = write_merged_file(model, Path(folder) / "merged-q8_0.gguf", "Q8_0")
        merge_s = time.perf_counter() - started
        q4 = write_merged_file(model, Path(folder) / "merged-q4_1.gguf", "Q4_1")
        settings = DiffusionLoadSettings(n_ctx=512)
        rows = {
            "base + adapter": LlamaDiffusionBackend(base, settings, adapter=args.adapter),
            "merged, Q8_0": LlamaDiffusionBackend(q8, settings),
            "merged, Q4_1": LlamaDiffusionBackend(q4, settings),
        }
        print(f"merging into Q8_0 took {merge_s:.1f} s ({q8.stat().st_size / 1e6:.0f} MB)")
        passes: dict[str, list[float]] = {name: [] for name in rows}
        texts: dict[str, list[str]] = {name: [] for name in rows}
        for prompt in prompts:
            for name, backend in rows.items():  # interleaved, so load on the machine hits every row alike
                seconds, text = timed_draft(DiffusionEngine(backend, name), prompt)
                passes[name] += seconds
                texts[name].append(text)
        reference = texts["base + adapter"]
        print(f"\n{len(prompts)} unseen prompts, {N}-token drafts at K = N/4 (blocks of 32, dual cache)")
        print(f"{'file':16} | {'median s/pass':>13} | {'mean s/pass':>11} | {'vs adapter':>10} | same draft words")
        adapter_mean = statistics.mean(passes["base + adapter"])
        for name in rows:
            same = [
                sum(a == b for a, b in zip(x.split(), y.split(), strict=False)) / max(1, len(y.split()))
                for x, y in zip(texts[name], reference, strict=True)
            ]
            print(
                f"{name:16} | {statistics.median(passes[name]):13.3f} | {statistics.mean(passes[name]):11.3f} | "
                f"{statistics.mean(passes[name]) / adapter_mean:10.2f} | {statistics.mean(same):.0%}"
            )


if __name__ == "__main__":
    main()
