"""`sharpen route` (which engine would serve a request, and why) and `sharpen calibrate`."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, replace
from pathlib import Path

from app.cli.common import Command, checked_flag, engine_label, fail, service, setting_flag
from app.cli.plot import LONGEST, PLOT_WIDTH, SHORTEST, CostChart, Crossover, Curve, plot_size, render, sample_lengths
from app.service import SharpenService
from app.storage.atomic import write_atomic
from app.storage.config import at_least
from router.cost import DiffusionPlan, diffusion_faster, draft_estimates
from router.cost_measurement import QUICK, CalibrationSizes
from router.crossover import Stretch, sentence, stretches, turning_points
from router.kernel_costs import named_table
from router.policy import SHORT_OUTPUT_TOKENS, STEPS_PER_TOKEN, diffusion_plan
from router.profile import CostProfile, render_profile
from router.request import ENGINES, KINDS, POLICIES, QUALITIES, EngineName, Estimate, Request

# The longest draft `calibrate --show` describes.
SENTENCE_LONGEST = 4096


def route_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kind", choices=KINDS, required=True)
    parser.add_argument(
        "--tokens",
        type=checked_flag(int, at_least(1)),
        required=True,
        metavar="N",
        help="the output length asked for (drafts are estimated for the length they are expected to write)",
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
    lengths_warning = sharpen.routing.draft_lengths()[1]
    for found in (warning, lengths_warning):
        if found:
            print(f"sharpen: warning: {found}", file=sys.stderr)
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
            elif costs.scaled_from:
                how = (
                    f"estimated for {costs.model} from the costs measured for {costs.scaled_from}, by their files' "
                    f"work at the kernel costs of {named_table(costs.kernels).label}"
                )
            else:
                how = f"measured for {costs.model}" if costs.measured else f"estimated from the size of {costs.model}"
            print(f"  {marker} {engine_label(name):9} {estimate.seconds:8.2f} s  {estimate.detail} ({how})")
        print(f"  settings: {json.dumps(chosen.settings)}")
    return 0


def calibrate_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--show", action="store_true", help="print the saved profile without measuring")
    parser.add_argument("--quick", action="store_true", help="a smaller, faster measurement")
    parser.add_argument(
        "--plot", type=svg_path, metavar="FILE", help="also write the plot of both engines' estimates as an SVG"
    )


def svg_path(text: str) -> Path:
    if Path(text).suffix.lower() != ".svg":
        raise argparse.ArgumentTypeError(f"the plot is written as SVG: give a FILE ending in .svg, got {text!r}")
    return Path(text)


@dataclass(frozen=True)
class DraftEstimates:
    """Both engines' estimates for a draft of any length, as `sharpen route --kind draft` compares them (for
    the length asked): the router's cost functions (router/cost.py draft_estimates), its plan for that
    length (diffusion_plan: the configured settings, K scaled by the quality preset) and the context a
    Request assumes by default."""

    profile: CostProfile
    base: DiffusionPlan
    request: Request  # a draft at the configured quality; its output length is replaced

    @classmethod
    def of(cls, sharpen: SharpenService, profile: CostProfile) -> DraftEstimates:
        request = Request("draft", 1, quality=sharpen.config.router.quality)
        return cls(profile, sharpen.draft_settings.plan(), request)

    def plan_for(self, n: int) -> DiffusionPlan:
        return diffusion_plan(replace(self.request, output_tokens=n), self.base)

    def at(self, n: int) -> tuple[Estimate, Estimate]:
        """AR's and diffusion's estimates for a draft asked for `n` tokens."""
        request = self.request
        return draft_estimates(n, request.prompt_tokens, request.suffix_tokens, self.plan_for, self.profile)

    def diffusion_faster(self, shortest: int, longest: int) -> list[tuple[int, int]]:
        """The ranges of lengths at which diffusion is estimated faster (router/cost.py diffusion_faster)."""
        prompt = self.request.prompt_tokens
        return diffusion_faster(self.profile, self.plan_for, shortest, prompt, longest)


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
    print(f"# {load_line(profile)}")
    present = sharpen.routing.present_engines()
    print_draft_lengths(sharpen, present)
    drafts = DraftEstimates.of(sharpen, profile)
    summary = crossover_sentence(drafts, present)
    print(f"# {summary}")
    width, height, colour = plot_size(sys.stdout)
    print(render(cost_chart(drafts, present, width), width, height, colour))
    if args.plot is not None:
        from app.cli.plot import render_svg

        try:
            write_atomic(args.plot, render_svg(cost_chart(drafts, present)).encode("utf-8"))
        except OSError as error:
            return fail(f"cannot write the plot to {args.plot}: {error.strerror or error}")
        print(f"wrote {args.plot}", file=sys.stderr)
    return 0


def print_draft_lengths(sharpen: SharpenService, present: dict[EngineName, str]) -> None:
    """How long each engine's drafts of the configured length are expected to run (router/expected_lengths.py): what
    the wait for a draft is estimated for. The engines are compared, above, for the length asked."""
    book, warning = sharpen.routing.draft_lengths()
    if warning:
        print(f"sharpen: warning: {warning}", file=sys.stderr)
    n = sharpen.config.diffusion.tokens
    expected = book.expected_tokens("draft", present)
    for engine, model in present.items():
        known = book.of(engine, "draft", model)
        tokens = expected(engine, n)
        if known.known:
            source = f"as its last {len(known.drafts)} drafts ran"
        elif tokens < n:
            source = f"as the engines' last drafts ran ({len(known.drafts)} of its own)"
        else:
            source = f"the length asked ({len(known.drafts)} drafts of its own known)"
        print(f"# {engine_label(engine)}: a draft of {n} tokens is expected to write ~{tokens:.0f}, {source}")


def load_line(profile: CostProfile) -> str:
    """Whether the profile was measured on an idle machine, in a line (router/machine_load.py)."""
    if not profile.calibrated:
        return "not measured on this machine: the costs are estimated (run `sharpen calibrate`)"
    load = profile.load
    figures = (
        f"other processes kept {load.others_before:.1f} of {load.cores} cores busy before it, "
        f"{load.others_during:.1f} while it measured"
    )
    if not profile.measured_under_load:
        return f"measured on an idle machine ({figures})"
    return (
        f"measured under load ({figures}): the costs read high; the editor or the server measures them again "
        "when it next starts on an idle machine (or run `sharpen calibrate`)"
    )


def draft_stretches(drafts: DraftEstimates, shortest: int, longest: int) -> tuple[list[Stretch], int]:
    """Which engine is estimated faster from `shortest` to `longest` tokens, and the period of its saw-tooth."""
    base = drafts.base
    period = base.block_length if base.schedule == "blocks" else 1
    return stretches(drafts.diffusion_faster(shortest, longest), shortest, longest, period), period


def crossover_sentence(drafts: DraftEstimates, present: dict[EngineName, str]) -> str:
    """Which engine is estimated faster for which lengths, in one sentence (the drafts the router routes by
    its estimates: SHORT_OUTPUT_TOKENS and longer)."""
    which = (
        f"drafts of {SHORT_OUTPUT_TOKENS} to {SENTENCE_LONGEST} tokens (after a {drafts.request.prompt_tokens}-token "
        f"prompt, at quality {drafts.request.quality})"
    )
    engines = [e for e in ENGINES if e in present]
    if len(engines) == 1:
        return f"{which}: only the {engine_label(engines[0])} engine's model is present, so every draft goes to it"
    parts, period = draft_stretches(drafts, SHORT_OUTPUT_TOKENS, SENTENCE_LONGEST)
    return f"{which}: {sentence(parts, period)}; shorter drafts go to AR whatever the estimates"


def cost_chart(drafts: DraftEstimates, present: dict[EngineName, str], width: int = PLOT_WIDTH) -> CostChart:
    """The plot of both engines' estimates from SHORTEST to LONGEST tokens, with the lengths where the faster
    engine changes marked: where the stretches of crossover_sentence begin."""
    profile = drafts.profile
    lengths = sample_lengths(SHORTEST, LONGEST)
    estimates = [drafts.at(n) for n in lengths]
    engines: tuple[EngineName, ...] = tuple(e for e in ENGINES if e in present) or ENGINES
    curves = tuple(
        Curve(
            engine,
            _curve_label(engine, profile, present),
            tuple(pair[ENGINES.index(engine)].seconds for pair in estimates),
        )
        for engine in engines
    )
    crossovers: list[Crossover] = []
    if len(engines) == 1:
        note = f"no crossover: only {engine_label(engines[0])} is present"
    else:
        parts, _period = draft_stretches(drafts, SHORT_OUTPUT_TOKENS, SENTENCE_LONGEST)
        crossovers = [Crossover(n, label) for n, label in turning_points(parts) if SHORTEST <= n <= LONGEST]
        note = ""
        if not crossovers:
            faster = parts[0].faster if len(parts) == 1 else None
            note = f"no crossover: {engine_label(faster)} faster throughout" if faster else "no crossover in range"
    return CostChart(_title(drafts, engines, width), lengths, curves, tuple(crossovers), note)


def _title(drafts: DraftEstimates, engines: tuple[EngineName, ...], width: int) -> str:
    """The quality preset, the rule for the passes K and whether each engine's costs were measured, in the
    longest wording that fits the plot's width."""
    quality, rule = drafts.request.quality, _passes_rule(drafts)
    sources = [
        (
            engine_label(e),
            "measured" if (drafts.profile.ar if e == "ar" else drafts.profile.diffusion).measured else "estimated",
        )
        for e in engines
    ]
    long = ", ".join(f"{name} {how}" for name, how in sources)
    short = ", ".join(f"{name[:4]} {how[:4]}." for name, how in sources)
    k = rule.split(",")[0]
    candidates = (
        f"Estimated seconds per draft · quality {quality}, {rule} · {long}",
        f"Estimated seconds per draft · quality {quality}, {k} · {long}",
        f"Seconds per draft · quality {quality}, {k} · {long}",
        f"quality {quality}, {k} · {short}",
    )
    return next((t for t in candidates if len(t) <= width - 8), candidates[-1])


def _curve_label(engine: EngineName, profile: CostProfile, present: dict[EngineName, str]) -> str:
    costs = profile.ar if engine == "ar" else profile.diffusion
    model = costs.model or present.get(engine) or "default costs"
    return f"{engine_label(engine)}: {model}"


def _passes_rule(drafts: DraftEstimates) -> str:
    """How many diffusion passes K a draft of N tokens gets (router/policy.py diffusion_plan)."""
    if drafts.base.threshold is not None:
        return f"K ~ {drafts.profile.diffusion.threshold_passes_per_token:g} x N (threshold decoding)"
    per_token = STEPS_PER_TOKEN[drafts.request.quality]
    rule = f"K = N/{round(1 / per_token)}" if per_token < 1 else f"K = {per_token:g} x N"
    return rule + (
        f", at least 1 per {drafts.base.block_length}-token block" if drafts.base.schedule == "blocks" else ""
    )


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
