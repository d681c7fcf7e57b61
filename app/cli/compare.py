"""`sharpen compare PROMPT`: both engines on the same request, one after the other, each with the machine to
itself (rounds interleaved where repeated); each draft with its time, its speed and its steps, beside what the
router would choose and its estimates; `--export FILE` writes both drafts side by side as they happened."""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from app.cli.common import EXIT_USAGE, Command, checked_flag, fail, read_text, read_text_file, service, setting_flag
from app.domain.draft_request import DraftRequest
from app.domain.figures import ENGINE_LABELS, DraftFigures, other_engine
from app.domain.reply import Reply
from app.service import SharpenService
from app.storage.config import between
from engines.threads import YIELD_AT_CORES, cpu_load
from engines.trace import TraceError
from router.request import ENGINES, EngineName, Route

MAX_ROUNDS = 20


@dataclass(frozen=True)
class Run:
    """One engine's draft in one round, and the cores other work kept busy just before it ran."""

    round: int
    reply: Reply
    figures: DraftFigures
    busy_cores: float

    def as_json(self) -> dict[str, Any]:
        done = self.reply.done
        assert done is not None, "a run has finished"
        figures = self.figures
        steps = {"passes" if figures.engine == "diffusion" else "steps": figures.steps}
        return {
            "round": self.round,
            "engine": figures.engine,
            "model": figures.model,
            "text": done.text,
            "seconds": round(figures.seconds, 4),
            "tokens": figures.tokens,
            "tokens_per_s": round(figures.tokens_per_s, 2),
            **steps,
            "finish_reason": done.stats.finish_reason,
            "busy_cores_other_work": round(self.busy_cores, 2),
        }


def compare_arguments(parser: argparse.ArgumentParser) -> None:
    from app.recording.screens import DEFAULT_HEIGHT, DEFAULT_WIDTH

    parser.add_argument("prompt", help="what to write ('-' reads standard input)")
    parser.add_argument(
        "--context", metavar="FILE", help="the document the drafts go into (at its end): written to fit there"
    )
    parser.add_argument(
        "--tokens",
        type=setting_flag("diffusion.tokens"),
        metavar="N",
        help="draft length in tokens (config: diffusion.tokens)",
    )
    parser.add_argument(
        "--repeat",
        type=checked_flag(int, between(1, MAX_ROUNDS)),
        default=1,
        metavar="R",
        help="rounds: each runs both engines, one after the other, the first of one round second in the next "
        "(the medians are printed)",
    )
    parser.add_argument("--json", action="store_true", help="print the drafts, their figures and the route as JSON")
    parser.add_argument(
        "--export",
        dest="out",  # a path: it keeps its bytes
        metavar="FILE",
        help="write the first round's drafts side by side as they happened: FILE.svg, FILE.cast or FILE.gif",
    )
    parser.add_argument(
        "--width",
        type=checked_flag(int, between(40, 400)),
        default=DEFAULT_WIDTH,
        help=f"the recording's width in columns, both drafts together (default {DEFAULT_WIDTH})",
    )
    parser.add_argument(
        "--height",
        type=checked_flag(int, between(4, 200)),
        default=DEFAULT_HEIGHT,
        help=f"the recording's height in rows (default {DEFAULT_HEIGHT})",
    )


def compare(args: argparse.Namespace) -> int:
    instruction = read_text(args.prompt)
    if not instruction.strip():
        return fail("the prompt is empty: say what to write", EXIT_USAGE)
    out = Path(args.out) if args.out is not None else None
    if out is not None:
        from app.recording.export import export_format

        export_format(out)  # an extension Sharpen does not write fails before the drafts run
    document = read_text_file(Path(args.context).expanduser(), f"--context {args.context}") if args.context else ""
    sharpen = service()
    missing = [engine for engine in ENGINES if engine not in sharpen.routing.present_engines()]
    if missing:
        setting = "models.complete" if missing[0] == "ar" else "models.draft"
        return fail(
            f"compare needs both engines: no {ENGINE_LABELS[missing[0]]} model is present "
            f"(`sharpen config set {setting} NAME`; `sharpen models` lists them)"
        )
    request = DraftRequest("draft", instruction, before=document, tokens=args.tokens)
    advice = sharpen.draft_route(request)
    runs = _run_rounds(sharpen, request, args.repeat, live=not args.json and sys.stderr.isatty())
    exported: str | None = None
    export_error: TraceError | None = None
    if out is not None:
        try:
            exported = _export(runs, out, args, instruction)
        except TraceError as error:
            export_error = error  # reported after the drafts are out, so they are never lost
    if args.json:
        print(json.dumps(_as_json(request, advice, runs, exported)))
    else:
        _print(advice, runs)
    busiest = max(run.busy_cores for run in runs)
    if busiest >= 1 - YIELD_AT_CORES and not args.json:
        print(
            f"sharpen: note: other work kept {busiest:.1f} cores busy before a draft ran: the times are not those of "
            "an idle machine (`sharpen doctor` says what keeps it busy)",
            file=sys.stderr,
        )
    if export_error is not None:
        raise export_error
    return 0


def _run_rounds(sharpen: SharpenService, request: DraftRequest, rounds: int, *, live: bool) -> list[Run]:
    """Both engines each round, one after the other (never at once: each has the machine to itself), the engine
    that went first going second in the next round, so that neither always runs on a machine the other warmed."""
    runs: list[Run] = []
    for number in range(1, rounds + 1):
        order: tuple[EngineName, ...] = ENGINES if number % 2 else tuple(reversed(ENGINES))
        for engine in order:
            if live:
                sys.stderr.write(f"\r\033[Kround {number} of {rounds}: {ENGINE_LABELS[engine]} drafting…")
                sys.stderr.flush()
            busy = cpu_load().others()
            reply = sharpen.draft(replace(request, engine=engine))
            reply.text()
            runs.append(Run(number, reply, reply.figures(), busy))
    if live:
        sys.stderr.write("\r\033[K")
    return runs


def _estimates(route: Route) -> list[str]:
    return [
        f"  {ENGINE_LABELS[engine]:9}  estimated {estimate.seconds_as_asked:6.2f} s  {estimate.detail}"
        for engine, estimate in sorted(route.estimates.items())
    ]


def _print(advice: Route, runs: list[Run]) -> None:
    print(f"the router would choose {ENGINE_LABELS[advice.engine]} ({advice.model}): {advice.reason}")
    print("\n".join(_estimates(advice)))
    for run in (run for run in runs if run.round == 1):
        figures, done = run.figures, run.reply.done
        assert done is not None
        print(
            f"\n{ENGINE_LABELS[figures.engine]} ({figures.model}): {figures.tokens} tokens in {figures.seconds:.2f} s, "
            f"{figures.tokens_per_s:.1f} tokens/s, {figures.steps_text}"
        )
        print(done.text)
    medians = _medians(runs)
    rounds = max(run.round for run in runs)
    if rounds > 1:
        print(f"\n{'round':>5}  {'engine':9}  {'seconds':>8}  {'tokens':>6}  {'tokens/s':>8}  steps")
        for run in runs:
            f = run.figures
            print(
                f"{run.round:>5}  {ENGINE_LABELS[f.engine]:9}  {f.seconds:8.2f}  {f.tokens:>6}  "
                f"{f.tokens_per_s:8.1f}  {f.steps_text}"
            )
    faster: EngineName = min(medians, key=lambda engine: medians[engine]["seconds"])
    slower = other_engine(faster)
    which = f"median of {rounds} rounds" if rounds > 1 else "measured"
    print(
        f"\n{which}: {ENGINE_LABELS[faster]} {medians[faster]['seconds']:.2f} s "
        f"({medians[faster]['tokens_per_s']:.1f} tokens/s) against {ENGINE_LABELS[slower]} "
        f"{medians[slower]['seconds']:.2f} s ({medians[slower]['tokens_per_s']:.1f} tokens/s); "
        f"the router would choose {ENGINE_LABELS[advice.engine]}"
    )


def _medians(runs: list[Run]) -> dict[EngineName, dict[str, float]]:
    return {
        engine: {
            "seconds": statistics.median(run.figures.seconds for run in runs if run.figures.engine == engine),
            "tokens_per_s": statistics.median(run.figures.tokens_per_s for run in runs if run.figures.engine == engine),
        }
        for engine in ENGINES
    }


def _as_json(request: DraftRequest, advice: Route, runs: list[Run], exported: str | None) -> dict[str, Any]:
    medians = {
        engine: {key: round(value, 4) for key, value in figures.items()} for engine, figures in _medians(runs).items()
    }
    return {
        "prompt": request.instruction,
        "tokens": advice.max_tokens,
        "router": advice.as_json(),
        "runs": [run.as_json() for run in runs],
        "median": medians,
        "export": exported,
    }


def _export(runs: list[Run], out: Path, args: argparse.Namespace, instruction: str) -> str:
    from app.recording.export import export_recording
    from app.recording.screens import ExportError, ExportOptions
    from app.recording.side_by_side import side_by_side

    first = {run.figures.engine: run.reply.trace() for run in runs if run.round == 1}
    ar, diffusion = first["ar"], first["diffusion"]
    if ar is None or diffusion is None:
        empty = " and ".join(ENGINE_LABELS[engine] for engine, trace in first.items() if trace is None)
        raise ExportError(f"{out}: not written: the {empty} draft wrote nothing to show")
    options = ExportOptions(width=args.width, height=args.height)
    title = f"Sharpen: AR against diffusion on {instruction[:60]!r}, as it happened"
    written = export_recording(side_by_side([ar, diffusion], options, title), out, options)
    print(f"wrote {out}: both drafts side by side, {written / 1024:.1f} KB", file=sys.stderr)
    return str(out)


COMMANDS = (
    Command(
        "compare",
        "draft the same request with both engines, one after the other, and compare them",
        compare_arguments,
        compare,
    ),
)
