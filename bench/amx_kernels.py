"""ggml's AMX kernels against the same llama.cpp without them, side by side in one run.

The installed llama-cpp-python (scripts/bootstrap: on an AMX CPU it has the AMX kernels, patched to run)
against the same version built here by scripts/llama-cpp-wheel with them left out (`NO_AMX_FLAGS`; built
once, about 4 to 7 minutes, then kept in the wheel cache). Each build runs in a child process of its own,
the two alternating over `--rounds` rounds. Per build, medians over the rounds: one decode of b rows against
a 200-token cache (logits for the rows the caller asks: 1 for AR, B + 1 for a block pass of the embedded
drafter, 2B rows with the settled block riding along) and 256 greedy AR tokens after a 200-token prompt
(its decode included).
The ratio column is the build without AMX over the installed one. On a CPU without AMX both builds are the
same binary and the ratios read about 1.
One llama.cpp job at a time: run it on an idle machine.

    .venv/bin/python bench/amx_kernels.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from machine import describe_machine

from engines.llama_build import NO_AMX_FLAGS, build_info

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent

AR_ROW, RIDING, SECOND = "AR, one token", "drafter, 16 rows (block of 8 riding along)", "drafter, 8 rows"
# (label, rows decoded, rows with logits): what AR and a block of 8 at the router's K = N/4 decode.
DECODES = ((AR_ROW, 1, 1), (RIDING, 16, 9), (SECOND, 8, 8))
AR_TOKENS = 256
AR_RUN = f"AR, {AR_TOKENS} tokens"


def measure() -> dict[str, float]:
    """In the child: this process's llama.cpp, timed (seconds)."""
    from block_diffusion import DOCUMENTS, PROMPT_TOKENS, drafter_file, row_costs
    from diffusion import ar_seconds

    from engines.diffusion.llama_backend import LlamaDiffusionBackend
    from engines.diffusion.load_settings import DiffusionLoadSettings
    from engines.llama_ar import LlamaAREngine, LlamaSettings
    from models.catalogue import resolve_model

    ar = LlamaAREngine(resolve_model("smollm2-135m-instruct").path, "smollm2", LlamaSettings(n_ctx=1024))
    drafter = LlamaDiffusionBackend(drafter_file(), DiffusionLoadSettings(n_ctx=1024, cache="block"))._llama
    prompt = ar._llama.tokenize(DOCUMENTS.read_text().split("===\n")[0].encode(), add_bos=True)[:PROMPT_TOKENS]
    figures: dict[str, float] = {}
    for label, rows, outputs in DECODES:
        llama = ar._llama if label == AR_ROW else drafter
        figures[label] = row_costs(llama, prompt, sizes=(rows,), outputs=partial(min, outputs))[rows]
    figures[AR_RUN] = statistics.median(ar_seconds(ar, prompt, AR_TOKENS) for _ in range(3))
    return figures


def build_without_amx() -> Path:
    """A folder holding llama-cpp-python built without the AMX kernels (the same version and patches)."""
    environment = dict(os.environ, CFLAGS=NO_AMX_FLAGS, CXXFLAGS=NO_AMX_FLAGS, PYTHON=sys.executable)
    wheel = subprocess.run(
        [str(ROOT / "scripts" / "llama-cpp-wheel")], env=environment, capture_output=True, text=True, check=True
    ).stdout.strip()
    target = Path(tempfile.mkdtemp(prefix="sharpen-no-amx-"))
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target), wheel], check=True
    )
    return target


def child(site: Path | None) -> tuple[str, dict[str, float]]:
    environment = dict(os.environ)
    if site is not None:
        environment["PYTHONPATH"] = str(site)  # ahead of the venv's own llama_cpp
    script = (
        "import json, sys; sys.path[:0] = [sys.argv[1], sys.argv[2]]; import llama_cpp, amx_kernels; "
        "print(json.dumps([llama_cpp.llama_print_system_info().decode().strip(), amx_kernels.measure()]))"
    )
    printed = subprocess.run(
        [sys.executable, "-c", script, str(BENCH), str(ROOT)],
        env=environment,
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    ).stdout
    system_info, figures = json.loads(printed.strip().splitlines()[-1])
    return system_info, figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(f"machine: {describe_machine()}")
    print(f"installed llama.cpp: {build_info().system_info}")
    builds: dict[str, Path | None] = {"installed": None, "without AMX": build_without_amx()}
    runs: dict[str, list[dict[str, float]]] = {label: [] for label in builds}
    for _ in range(args.rounds):
        for label, site in builds.items():
            system_info, figures = child(site)
            runs[label].append(figures)
            if len(runs[label]) == 1:
                print(f"{label}: {system_info}")
    labels = [label for label, _, _ in DECODES] + [AR_RUN]
    medians = {build: {k: statistics.median(r[k] for r in rounds) for k in labels} for build, rounds in runs.items()}
    print(f"\nmedians of {args.rounds} rounds, ms (the AR row: s and tokens/s)")
    print("| decode | installed | without AMX | without AMX / installed |")
    print("|---|---|---|---|")
    for key in labels:
        mine, plain = medians["installed"][key], medians["without AMX"][key]
        if key == AR_RUN:
            cells = f"{mine:.2f} s ({AR_TOKENS / mine:.0f}/s) | {plain:.2f} s ({AR_TOKENS / plain:.0f}/s)"
        else:
            cells = f"{mine * 1000:.1f} | {plain * 1000:.1f}"
        print(f"| {key} | {cells} | {plain / mine:.2f} |")
    for build, median in medians.items():
        one = median[AR_ROW]
        print(
            f"{build}: a 16-row pass costs {median[RIDING] / one:.2f} AR rows; a block of 8 in two passes "
            f"{(median[RIDING] + median[SECOND]) / 8 / one:.2f} AR rows a token"
        )


if __name__ == "__main__":
    main()
