"""`sharpen config`, `doctor` and `replay`."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from app.cli.common import EXIT_ERROR, Command, checked_flag, service
from app.storage.config import between, load_config, render_config, set_value
from app.storage.paths import sharpen_paths
from engines.trace import load_trace


def run_tui(document: Path | None = None, trace: Path | None = None) -> int:
    """Open the TUI (Textual is imported here, so the other commands start without it)."""
    from ui.app import SharpenApp

    SharpenApp(service(), document=document, trace=trace).run()
    return 0


def replay_arguments(parser: argparse.ArgumentParser) -> None:
    from app.recording.screens import DEFAULT_HEIGHT, DEFAULT_SPEED, DEFAULT_WIDTH

    parser.add_argument("trace", help="a trace file saved by `sharpen draft --trace` or the TUI (either engine's)")
    parser.add_argument(
        "--export",
        dest="out",  # a path: it keeps its bytes
        metavar="FILE",
        help="write the draft as a recording instead of opening playback: "
        "FILE.cast (asciinema), FILE.svg (animated, plays in a browser or a README) or FILE.gif",
    )
    parser.add_argument(
        "--speed",
        type=checked_flag(float, between(0.1, 100.0)),
        help=f"passes (or an AR draft's tokens) a second in the recording (default: {DEFAULT_SPEED:g} passes a "
        "second, an AR draft as it was written; the last frame is held 2 s)",
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
    from app.recording.export import export_format, export_trace
    from app.recording.frames import step_unit
    from app.recording.screens import ExportOptions

    out = Path(args.out)
    export_format(out)  # an extension Sharpen does not write fails before the trace is read
    trace = load_trace(args.trace)
    written = export_trace(trace, out, ExportOptions(speed=args.speed, width=args.width, height=args.height))
    print(f"wrote {out}: {trace.steps} {step_unit(trace)}, {written / 1024:.1f} KB", file=sys.stderr)
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
    from app.doctor.checks import diagnose
    from app.doctor.report import render

    report = diagnose()
    print(json.dumps(report.as_dict(), indent=2) if args.json else render(report), end="\n" if args.json else "")
    return 0 if report.ok else EXIT_ERROR


REPLAY = Command(
    "replay",
    "play back a saved draft trace (a diffusion draft's passes, an AR draft's tokens)",
    replay_arguments,
    replay,
)
CONFIG = Command("config", "show or change settings", config_arguments, config)
DOCTOR = Command(
    "doctor",
    "check the build, the CPU, the models, the calibration and the config; name each fix",
    doctor_arguments,
    doctor,
)
