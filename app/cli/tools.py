"""`sharpen config`, `doctor`, `replay` and (for development) `training-data`."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from app.cli.common import EXIT_ERROR, Command, checked_flag, fail, service
from app.storage.config import at_least, between, load_config, render_config, set_value
from app.storage.paths import sharpen_paths
from app.tools.instruction_sets import INSTRUCTION_SETS
from engines.diffusion.trace import load_trace


def run_tui(document: Path | None = None, trace: Path | None = None) -> int:
    """Open the TUI (Textual is imported here, so the other commands start without it)."""
    from ui.app import SharpenApp

    SharpenApp(service(), document=document, trace=trace).run()
    return 0


def replay_arguments(parser: argparse.ArgumentParser) -> None:
    from app.tools.recording import DEFAULT_HEIGHT, DEFAULT_SPEED, DEFAULT_WIDTH

    parser.add_argument("trace", help="a trace file saved by `sharpen draft --trace` or the TUI")
    parser.add_argument(
        "--export",
        dest="out",  # a path: it keeps its bytes
        metavar="FILE",
        help="write the refinement as a recording instead of opening playback: "
        "FILE.cast (asciinema), FILE.svg (animated, plays in a browser or a README) or FILE.gif",
    )
    parser.add_argument(
        "--speed",
        type=checked_flag(float, between(0.1, 100.0)),
        default=DEFAULT_SPEED,
        help=f"passes a second in the recording (default {DEFAULT_SPEED:g}; the last is held 2 s)",
    )
    parser.add_argument(
        "--width",
        type=checked_flag(int, between(20, 400)),
        default=DEFAULT_WIDTH,
        help=f"the recording's width in columns (default {DEFAULT_WIDTH})",
    )
    parser.add_argument(
        "--height",
        type=checked_flag(int, between(2, 200)),
        default=DEFAULT_HEIGHT,
        help=f"the recording's height in rows, the status line included (default {DEFAULT_HEIGHT})",
    )


def replay(args: argparse.Namespace) -> int:
    if args.out is None:
        load_trace(args.trace)  # a bad file fails here, with a clear message, before the screen opens
        return run_tui(trace=Path(args.trace))
    from app.tools.recording import ExportOptions, export_format, export_trace

    out = Path(args.out)
    export_format(out)  # an extension Sharpen does not write fails before the trace is read
    trace = load_trace(args.trace)
    written = export_trace(trace, out, ExportOptions(speed=args.speed, width=args.width, height=args.height))
    print(f"wrote {out}: {len(trace.passes)} passes, {written / 1024:.1f} KB", file=sys.stderr)
    return 0


def training_data_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", default="models/training/data/drafts.jsonl", help="JSON Lines file, appended to")
    parser.add_argument(
        "--count",
        type=checked_flag(int, at_least(1)),
        default=1000,
        help="how many instructions (resumes where it stopped)",
    )
    parser.add_argument("--seed", type=checked_flag(int, at_least(0)), default=0, help="which list of instructions")
    parser.add_argument(
        "--set",
        dest="instruction_set",
        choices=INSTRUCTION_SETS,
        default="templated",
        help="templated everyday messages; open kinds of writing (held-out kinds and topics left out); forms: "
        "more kinds of writing; drafts into a document (as Ctrl+D asks); rewrites of a selection with an instruction",
    )
    parser.add_argument(
        "--quoted-from",
        nargs="+",
        default=["models/training/data/drafts.jsonl"],
        help="drafts the open set quotes, and the document and rewrite sets cut into documents and selections",
    )
    parser.add_argument(
        "--no-repeat-ngram",
        type=checked_flag(int, between(0, 16)),
        default=None,
        metavar="N",
        help="no draft generates a run of N tokens twice (default: chat.no_repeat_ngram, as AR drafts use)",
    )
    parser.add_argument("--max-tokens", type=checked_flag(int, at_least(1)), default=160)
    parser.add_argument(
        "--temperature",
        type=checked_flag(float, between(0.0, 2.0)),
        default=0.0,
        help="0: greedy, written several at a time",
    )
    parser.add_argument(
        "--parallel", type=checked_flag(int, at_least(1)), default=16, help="greedy drafts decoded together"
    )


def training_data(args: argparse.Namespace) -> int:
    from app.tools.training_data import instruction_set, make_pairs
    from engines.llama_ar import LlamaAREngine

    def report(done: int, total: int, tokens: int) -> None:
        print(f"\r{done}/{total} drafts, {tokens} tokens", end="", file=sys.stderr, flush=True)

    engine = service().engines.ar()
    if not isinstance(engine, LlamaAREngine):
        return fail("training data is written by a local AR model: models.complete names a remote one")
    prompts = instruction_set(args.instruction_set, args.count, args.seed, [Path(p) for p in args.quoted_from])
    configured = service().config.chat.no_repeat_ngram
    written = make_pairs(
        engine,
        Path(args.out),
        prompts,
        max_tokens=args.max_tokens,
        temperature=args.temperature,
        parallel=args.parallel,
        no_repeat_ngram=configured if args.no_repeat_ngram is None else args.no_repeat_ngram,
        progress=report,
    )
    print(f"\nwrote {written} new drafts to {args.out}", file=sys.stderr)
    return 0


def config_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    actions.add_parser("path", help="print the config file's path")
    actions.add_parser("show", help="print every setting in effect")
    change = actions.add_parser("set", help="change one setting")
    change.add_argument("key", help="a dotted key, e.g. ar.n_ctx")
    change.add_argument("value")


def config(args: argparse.Namespace) -> int:
    path = sharpen_paths().config_file
    if args.action == "path":
        print(path)
    elif args.action == "show":
        print(render_config(load_config(path)), end="")
    else:
        value = set_value(path, args.key, args.value)
        print(f"{args.key} = {json.dumps(value)}  ({path})")
    return 0


def doctor_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="everything found, for a bug report")


def doctor(args: argparse.Namespace) -> int:
    from app.tools.doctor import diagnose, render

    report = diagnose()
    print(json.dumps(report.as_dict(), indent=2) if args.json else render(report), end="\n" if args.json else "")
    return 0 if report.ok else EXIT_ERROR


REPLAY = Command("replay", "open the playback of a saved refinement trace", replay_arguments, replay)
TRAINING_DATA = Command(
    "training-data",
    "(development) write instruction -> draft pairs with the AR model, for training",
    training_data_arguments,
    training_data,
)
CONFIG = Command("config", "show or change settings", config_arguments, config)
DOCTOR = Command(
    "doctor",
    "check the build, the CPU, the models, the calibration and the config; name each fix",
    doctor_arguments,
    doctor,
)
