"""`sharpen route` (which engine would serve a request, and why) and `sharpen calibrate`."""

from __future__ import annotations

import argparse
import json
import sys

from app.cli.common import Command, checked_flag, engine_label, service, setting_flag
from app.storage.config import at_least
from router.calibration import QUICK, CalibrationSizes
from router.cost import DiffusionPlan, diffusion_faster
from router.policy import SHORT_OUTPUT_TOKENS, diffusion_plan
from router.profile import render_profile
from router.request import ENGINES, KINDS, POLICIES, QUALITIES, Request


def route_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kind", choices=KINDS, required=True)
    parser.add_argument(
        "--tokens", type=checked_flag(int, at_least(1)), required=True, metavar="N", help="expected output length"
    )
    parser.add_argument(
        "--prompt-tokens",
        type=checked_flag(int, at_least(0)),
        default=32,
        metavar="P",
        help="context read before writing",
    )
    parser.add_argument(
        "--suffix-tokens",
        type=checked_flag(int, at_least(0)),
        default=0,
        metavar="S",
        help="context after an infill gap",
    )
    parser.add_argument("--stream", action="store_true", help="the output must appear token by token")
    parser.add_argument(
        "--budget",
        type=setting_flag("router.latency_budget_s"),
        metavar="SECONDS",
        help="latency budget (config: router.latency_budget_s)",
    )
    parser.add_argument("--policy", choices=POLICIES, help="config: router.policy")
    parser.add_argument("--quality", choices=QUALITIES, help="config: router.quality")
    parser.add_argument("--engine", choices=ENGINES, help="force an engine")
    parser.add_argument("--explain", action="store_true", help="show every estimate and the settings")
    parser.add_argument("--json", action="store_true")


def route(args: argparse.Namespace) -> int:
    sharpen = service()
    request = Request(
        kind=args.kind,
        output_tokens=args.tokens,
        prompt_tokens=args.prompt_tokens,
        suffix_tokens=args.suffix_tokens,
        stream_tokens=args.stream,
        latency_budget_s=args.budget,
        quality=args.quality or sharpen.config.router.quality,
        force_engine=args.engine,
    )
    chosen = sharpen.route(request, args.policy)
    profile, warning = sharpen.routing.cost_profile()
    if warning:
        print(f"sharpen: warning: {warning}", file=sys.stderr)
    if args.json:
        measured = {"ar": profile.ar.measured, "diffusion": profile.diffusion.measured}
        print(json.dumps(chosen.as_json() | {"calibrated": profile.calibrated, "measured": measured}))
        return 0
    print(f"{engine_label(chosen.engine)} ({chosen.model}): {chosen.reason}")
    if args.explain:
        source = f"calibrated {profile.created}" if profile.calibrated else "not calibrated (run `sharpen calibrate`)"
        print(f"  policy {chosen.policy}; costs: {source}")
        for name, estimate in chosen.estimates.items():
            marker = "*" if name == chosen.engine else " "
            costs = profile.ar if name == "ar" else profile.diffusion
            if not costs.model:
                how = "default costs"
            else:
                how = f"measured for {costs.model}" if costs.measured else f"estimated from the size of {costs.model}"
            print(f"  {marker} {engine_label(name):9} {estimate.seconds:8.2f} s  {estimate.detail} ({how})")
        print(f"  settings: {json.dumps(chosen.settings)}")
    return 0


def calibrate_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--show", action="store_true", help="print the saved profile without measuring")
    parser.add_argument("--quick", action="store_true", help="a smaller, faster measurement")


def calibrate(args: argparse.Namespace) -> int:
    sharpen = service()
    if not args.show:
        sizes = QUICK if args.quick else CalibrationSizes()
        sharpen.calibrations.calibrate(sizes, progress_bar)
        print(f"saved {sharpen.routing.profile_path}", file=sys.stderr)
    profile, warning = sharpen.routing.cost_profile()
    if warning:
        print(f"sharpen: warning: {warning}", file=sys.stderr)
    print(render_profile(profile), end="")
    base = sharpen.draft_settings.plan()
    quality = sharpen.config.router.quality

    def plan_for(n: int) -> DiffusionPlan:
        return diffusion_plan(Request("draft", n, quality=quality), base)

    longest = 4096
    faster = diffusion_faster(profile, plan_for, SHORT_OUTPUT_TOKENS, longest=longest)
    drafts = f"drafts of {SHORT_OUTPUT_TOKENS} to {longest} tokens (after a 32-token prompt, at quality {quality})"
    if not faster:
        print(f"# diffusion is not estimated faster than AR for any of the {drafts}")
    else:
        spans = ", ".join(f"{lo}+" if hi == longest else f"{lo}-{hi}" for lo, hi in faster)
        print(f"# diffusion is estimated faster than AR at {spans} tokens, of the {drafts}")
    return 0


def progress_bar(fraction: float, label: str) -> None:
    if not sys.stderr.isatty():
        return
    filled = int(fraction * 30)
    sys.stderr.write(f"\r\033[K[{'#' * filled}{'.' * (30 - filled)}] {fraction:4.0%} {label}")
    if fraction >= 1.0:
        sys.stderr.write("\n")
    sys.stderr.flush()


COMMANDS = (
    Command("route", "show which engine would serve a request, and why", route_arguments, route),
    Command("calibrate", "measure the engines on this machine for the router", calibrate_arguments, calibrate),
)
