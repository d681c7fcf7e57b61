"""Router accuracy: 30 mixed requests run on both engines; regret of `fastest` and estimate errors.

Engines: SmolLM2-135M-Instruct (AR) and the 135M diffusion-form stand-in with a prefix cache
(bench/stand_in.py). The router is calibrated on this machine first (the same code as
`sharpen calibrate`), then every request runs on both engines and the measured times are compared
with the estimates and with the `fastest` policy's choice.

    .venv/bin/python bench/routing.py [--requests 30] [--seed 0]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from collections.abc import Iterable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import describe_machine
from stand_in import write_stand_in

from engines.diffusion.engine import DiffusionEngine
from engines.diffusion.llama_backend import LlamaDiffusionBackend
from engines.diffusion.load_settings import DiffusionLoadSettings
from engines.diffusion.settings import DiffusionSettings
from engines.events import Done, Event
from engines.llama_ar import LlamaAREngine, LlamaSettings
from models.catalogue import resolve_model
from router.cost import DiffusionPlan
from router.cost_measurement import CalibrationSizes, calibrate
from router.policy import decide, diffusion_plan
from router.request import ENGINES, EngineName, Kind, Request

OUT = Path(__file__).resolve().parent / "out"
DOCUMENTS = Path(__file__).resolve().parent / "data" / "documents.txt"
INSTRUCTIONS = [
    "Write a short email to the team about the office move.",
    "Draft a polite reply declining the invitation to speak.",
    "Write a paragraph summarising the meeting about the budget.",
    "Write a note to a neighbour about the parking rules.",
]


def finish(events: Iterable[Event]) -> None:
    for event in events:
        if isinstance(event, Done):
            return


def ar_exactly(engine: LlamaAREngine, prompt: list[int], n: int) -> float:
    """Seconds for the AR engine's model to produce exactly n tokens after `prompt`, end-of-text ignored.

    The router estimates the cost of n tokens; when and whether a model stops early is another question.
    """
    engine.forget_cache()
    start = time.perf_counter()
    for count, _token in enumerate(engine._llama.generate(prompt, temp=0.0), start=1):
        if count >= n:
            break
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=30)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    source = resolve_model("smollm2-135m-instruct").path
    stand_in = write_stand_in(source, OUT / "smollm2-cacheable.gguf", arch="llama", causal=False)
    ar = LlamaAREngine(source, "smollm2-135m-instruct", LlamaSettings(n_ctx=2048))
    diffusion = DiffusionEngine(LlamaDiffusionBackend(stand_in, DiffusionLoadSettings(n_ctx=1024)), "stand-in")
    print(f"machine: {describe_machine()}")
    started = time.perf_counter()
    profile = calibrate("cpu", ar, diffusion, CalibrationSizes(canvas_sizes=(64, 128, 256), threshold_tokens=32))
    print(
        f"calibrated in {time.perf_counter() - started:.0f} s: AR {profile.ar.seconds_per_token * 1000:.1f} ms/token, "
        f"prompt {profile.ar.prompt_tokens_per_s:.0f} tok/s; "
        f"diffusion pass {profile.diffusion.pass_base_s * 1000:.0f} ms "
        f"+ {profile.diffusion.pass_s_per_position * 1000:.2f} ms/position"
    )
    documents = DOCUMENTS.read_text().split("===\n")
    base = DiffusionPlan(steps=64, block_length=32)
    models: dict[EngineName, str] = {"ar": "smollm2", "diffusion": "stand-in"}
    errors: dict[EngineName, list[float]] = {"ar": [], "diffusion": []}
    chosen_total = best_total = 0.0
    print(f"\n{'#':>2} {'kind':7} {'N':>4} | {'AR est':>7} {'AR real':>7} | {'dif est':>7} {'dif real':>8} | pick")
    for number in range(args.requests):
        kind: Kind = rng.choice(["draft", "draft", "infill", "chat"])
        n = rng.choice([32, 48, 64, 96, 128, 160])
        instruction = rng.choice(INSTRUCTIONS)
        document = rng.choice(documents)
        cut = rng.randrange(200, 800)
        before, after = document[:cut], document[cut : cut + 300]
        prompt_tokens = (
            len(diffusion.backend.instruction_tokens(instruction))
            if kind != "infill"
            else len(diffusion.backend.tokenize(before, add_bos=True))
        )
        suffix_tokens = len(diffusion.backend.tokenize(after, add_bos=False)) if kind == "infill" else 0
        request = Request(kind, n, prompt_tokens=prompt_tokens, suffix_tokens=suffix_tokens)
        route = decide(request, profile, models, base, "fastest")
        plan = diffusion_plan(request, base)
        settings = DiffusionSettings.reference(steps=plan.steps, block_length=plan.block_length, stop_at_eos=False)
        measured: dict[EngineName, float] = {}
        if kind == "infill":
            ar_prompt, _trimmed = ar.completion_prompt(before, None, n)
        else:
            ar_prompt = ar.chat_prompt(instruction, n)
        measured["ar"] = ar_exactly(ar, ar_prompt, n)
        t0 = time.perf_counter()
        if kind == "infill":
            finish(diffusion.infill(before, after, n, settings))
        else:
            finish(diffusion.draft(instruction, n, settings))
        measured["diffusion"] = time.perf_counter() - t0
        for engine in ENGINES:
            estimate = route.estimates[engine].seconds
            errors[engine].append(abs(estimate - measured[engine]) / measured[engine])
        chosen_total += measured[route.engine]
        best_total += min(measured.values())
        print(
            f"{number + 1:>2} {kind:7} {n:>4} | {route.estimates['ar'].seconds:7.2f} {measured['ar']:7.2f} | "
            f"{route.estimates['diffusion'].seconds:7.2f} {measured['diffusion']:8.2f} | {route.engine}"
        )
    regret = chosen_total / best_total - 1
    print(
        f"\nregret of `fastest`: {regret * 100:.1f}% (chosen {chosen_total:.1f} s against best {best_total:.1f} s; "
        "target <= 10%)"
    )
    for engine in ENGINES:
        print(f"median estimate error, {engine}: {statistics.median(errors[engine]) * 100:.1f}% (target <= 25%)")


if __name__ == "__main__":
    main()
