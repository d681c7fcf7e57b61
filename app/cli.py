"""The `sharpen` command line. Every command goes through SharpenService, as the TUI does."""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict
from importlib.metadata import version
from pathlib import Path
from typing import Any, NoReturn, TextIO

from app.config import (
    BadValue,
    Check,
    SettingSpec,
    at_least,
    between,
    convert_text,
    load_config,
    render_config,
    set_value,
    settings_registry,
)
from app.paths import sharpen_paths
from app.service import SharpenError, SharpenService
from app.traces import save_trace
from engines.diffusion.settings import ALGORITHMS, EOS_RULES, SCHEDULES, DiffusionSettings
from engines.diffusion.trace import TraceError, load_trace
from engines.events import Done, DraftStats, Event, GenerationStats, Pass, Token
from models.gguf_info import inspect_gguf
from models.hf_checkpoint import inspect_checkpoint
from models.hub import PullProgress
from router.calibration import QUICK, CalibrationSizes
from router.cost import DiffusionPlan, crossover_tokens
from router.policy import diffusion_plan
from router.profile import render_profile
from router.request import ENGINES, KINDS, POLICIES, QUALITIES, Kind, Request, Route, approximate_tokens

EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 128 + getattr(signal, "SIGPIPE", 13)  # Windows has no SIGPIPE


class _Parser(argparse.ArgumentParser):
    """argparse, with its errors as Sharpen's one line (and no usage dump)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"sharpen: error: {message} (`{self.prog} --help` lists the options)\n")


def _flag_type(spec: SettingSpec, note: str = "") -> Callable[[str], Any]:
    """An argparse type that converts and checks as the config does, with the config's messages."""

    def convert(text: str) -> Any:
        try:
            return convert_text(spec, text)
        except BadValue as error:
            raise argparse.ArgumentTypeError(f"{error}{note}") from None

    return convert


def setting_flag(key: str) -> Callable[[str], Any]:
    """The type of a flag that overrides the setting `key`."""
    return _flag_type(settings_registry()[key], f" (as the setting {key})")


def checked_flag(kind: type, check: Check) -> Callable[[str], Any]:
    """The type of a flag that is no setting, checked by one of the config's checks."""
    return _flag_type(SettingSpec("", kind, None, "", check))


def _read_text(arg: str) -> str:
    return sys.stdin.read() if arg == "-" else arg


def _service() -> SharpenService:
    return SharpenService.from_environment()


def _run_stream(events: Iterator[Event], as_json: bool, model: Callable[[], str], out: TextIO) -> int:
    done: Done | None = None
    for event in events:
        if isinstance(event, Token) and not as_json:
            out.write(event.text)
            out.flush()
        elif isinstance(event, Done):
            done = event
    assert done is not None and isinstance(done.stats, GenerationStats), "an AR stream ends with Done(GenerationStats)"
    stats = done.stats
    if as_json:
        payload = {
            "text": done.text,
            "engine": "ar",
            "model": model(),
            "finish_reason": stats.finish_reason,
            "tokens": {
                "prompt": stats.prompt_tokens,
                "reused": stats.reused_tokens,
                "trimmed": stats.trimmed_tokens,
                "generated": stats.generated_tokens,
            },
            "timings": {
                "time_to_first_token_ms": None
                if stats.time_to_first_token_s is None
                else round(stats.time_to_first_token_s * 1000, 2),
                "total_ms": round(stats.total_s * 1000, 2),
                "tokens_per_s": round(stats.tokens_per_s, 2),
            },
        }
        out.write(json.dumps(payload) + "\n")
    else:
        out.write("\n")
        if stats.trimmed_tokens:
            print(
                f"sharpen: note: the first {stats.trimmed_tokens} tokens of the text did not fit the context "
                "and were not seen",
                file=sys.stderr,
            )
    return 0


def cmd_complete(args: argparse.Namespace) -> int:
    service = _service()
    events = service.complete(
        _read_text(args.text),
        args.suffix,
        max_tokens=args.max_tokens,
        stop=args.stop or (),
        temperature=args.temperature,
        trim="error" if args.no_trim else "left",
    )
    return _run_stream(events, args.json, lambda: service.completion_engine().model_name, sys.stdout)


def cmd_chat(args: argparse.Namespace) -> int:
    service = _service()
    events = service.chat(_read_text(args.text), max_tokens=args.max_tokens, temperature=args.temperature)
    return _run_stream(events, args.json, lambda: service.completion_engine().model_name, sys.stdout)


def _draft_settings(service: SharpenService, args: argparse.Namespace) -> DiffusionSettings:
    return service.diffusion_settings(
        steps=args.steps,
        schedule=args.schedule,
        block_length=args.block_length,
        threshold=args.threshold,
        algorithm=args.algorithm,
        eos=args.eos,
        spacing=args.spacing,
        temperature=args.temperature,
        top_k=args.top_k,
        top_p=args.top_p,
        seed=args.seed,
    )


def _run_draft(
    service: SharpenService,
    events: Iterator[Pass | Done],
    args: argparse.Namespace,
    prompt: str,
    kind: str,
    settings: DiffusionSettings,
) -> int:
    passes: list[Pass] = []
    streamed = ""
    live = not args.json and not args.stream and sys.stderr.isatty()
    done: Done | None = None
    for event in events:
        if isinstance(event, Pass):
            passes.append(event)
            if args.stream and len(event.stable_text) > len(streamed):
                sys.stdout.write(event.stable_text[len(streamed) :])
                sys.stdout.flush()
                streamed = event.stable_text
            elif live:
                settled = len(event.masked) - sum(event.masked)
                sys.stderr.write(f"\r\033[Kpass {event.index + 1}: {settled}/{len(event.masked)} tokens committed")
                sys.stderr.flush()
        else:
            done = event
    assert done is not None and isinstance(done.stats, DraftStats), "a draft stream ends with Done(DraftStats)"
    if live:
        sys.stderr.write("\r\033[K")
    stats = done.stats
    trace_path: Path | None = None
    trace_error: TraceError | None = None
    if args.trace:
        try:
            save_trace(service.build_trace(prompt, kind, settings, passes, done), Path(args.trace))
            trace_path = Path(args.trace)
        except TraceError as error:
            trace_error = error  # reported after the draft itself is out, so the text is never lost
    if args.json:
        payload = {
            "text": done.text,
            "engine": "diffusion",
            "model": service.draft_engine().model_name,
            "finish_reason": stats.finish_reason,
            "tokens": {
                "prompt": stats.prompt_tokens,
                "canvas": stats.canvas_tokens,
                "generated": stats.generated_tokens,
            },
            "passes": stats.passes,
            "timings": {
                "total_ms": round(stats.total_s * 1000, 2),
                "ms_per_pass": round(stats.ms_per_pass, 2),
                "tokens_per_s": round(stats.tokens_per_s, 2),
                "sampler_share": round(stats.sampler_share, 4),
            },
            "settings": settings.as_dict(),
            "trace": str(trace_path) if trace_path else None,
        }
        print(json.dumps(payload))
    elif args.stream:
        rest = done.text[len(streamed) :] if done.text.startswith(streamed) else "\n" + done.text
        print(rest)
    else:
        print(done.text)
    if not args.json:
        print(
            f"{stats.generated_tokens} tokens in {stats.passes} passes, {stats.total_s:.2f} s "
            f"({stats.ms_per_pass:.0f} ms/pass, {stats.tokens_per_s:.1f} tokens/s), {stats.finish_reason}",
            file=sys.stderr,
        )
    if trace_error is not None:
        raise trace_error
    return 0


def _route_draft(
    service: SharpenService, args: argparse.Namespace, kind: Kind, prompt: str, suffix: str, settings: DiffusionSettings
) -> Route:
    tokens = args.tokens or service.config.diffusion.tokens
    request = Request(
        kind=kind,
        output_tokens=tokens,
        prompt_tokens=approximate_tokens(prompt),
        suffix_tokens=approximate_tokens(suffix),
        force_engine=args.engine,
        quality=args.quality or service.config.router.quality,
    )
    route = service.route(request, args.policy, settings)
    if not args.json:
        print(f"sharpen: {_engine_label(route.engine)}: {route.reason}", file=sys.stderr)
    return route


def _engine_label(engine: str) -> str:
    return "AR" if engine == "ar" else "diffusion"


def cmd_draft(args: argparse.Namespace) -> int:
    service = _service()
    prompt = _read_text(args.prompt)
    settings = _draft_settings(service, args)
    route = _route_draft(service, args, "draft", prompt, "", settings)
    tokens = args.tokens or service.config.diffusion.tokens
    if route.engine == "ar":
        events = service.chat(prompt, max_tokens=tokens, temperature=args.temperature)
        return _run_stream(events, args.json, lambda: route.model, sys.stdout)
    settings = service.settings_for_route(route, settings, keep_steps=args.steps is not None)
    events = service.draft(prompt, tokens, settings, chat=not args.no_chat)
    return _run_draft(service, events, args, prompt, "draft", settings)


def cmd_infill(args: argparse.Namespace) -> int:
    service = _service()
    settings = _draft_settings(service, args)
    route = _route_draft(service, args, "infill", args.before, args.after, settings)
    tokens = args.tokens or service.config.diffusion.tokens
    if route.engine == "ar":
        events = service.complete(args.before, args.after, max_tokens=tokens, temperature=args.temperature)
        return _run_stream(events, args.json, lambda: route.model, sys.stdout)
    settings = service.settings_for_route(route, settings, keep_steps=args.steps is not None)
    events = service.infill(args.before, args.after, tokens, settings)
    return _run_draft(service, events, args, f"{args.before}\u2026{args.after}", "infill", settings)


def cmd_route(args: argparse.Namespace) -> int:
    service = _service()
    request = Request(
        kind=args.kind,
        output_tokens=args.tokens,
        prompt_tokens=args.prompt_tokens,
        suffix_tokens=args.suffix_tokens,
        stream_tokens=args.stream,
        latency_budget_s=args.budget,
        quality=args.quality or service.config.router.quality,
        force_engine=args.engine,
    )
    route = service.route(request, args.policy)
    profile, warning = service.cost_profile()
    if warning:
        print(f"sharpen: warning: {warning}", file=sys.stderr)
    if args.json:
        payload = {
            "engine": route.engine,
            "model": route.model,
            "settings": route.settings,
            "reason": route.reason,
            "policy": route.policy,
            "estimates": {
                name: {"seconds": round(e.seconds, 4), "detail": e.detail} for name, e in route.estimates.items()
            },
            "calibrated": profile.calibrated,
        }
        print(json.dumps(payload))
        return 0
    print(f"{_engine_label(route.engine)} ({route.model}): {route.reason}")
    if args.explain:
        source = f"calibrated {profile.created}" if profile.calibrated else "default costs (run `sharpen calibrate`)"
        print(f"  policy {route.policy}; costs: {source}")
        for name, estimate in route.estimates.items():
            marker = "*" if name == route.engine else " "
            print(f"  {marker} {_engine_label(name):9} {estimate.seconds:8.2f} s  {estimate.detail}")
        print(f"  settings: {json.dumps(route.settings)}")
    return 0


def cmd_calibrate(args: argparse.Namespace) -> int:
    service = _service()
    if not args.show:
        sizes = QUICK if args.quick else CalibrationSizes()
        service.calibrate(sizes, _progress_bar)
        print(f"saved {service.profile_path}", file=sys.stderr)
    profile, warning = service.cost_profile()
    if warning:
        print(f"sharpen: warning: {warning}", file=sys.stderr)
    print(render_profile(profile), end="")
    base = service.base_plan()
    quality = service.config.router.quality

    def plan_for(n: int) -> DiffusionPlan:
        return diffusion_plan(Request("draft", n, quality=quality), base)

    crossover = crossover_tokens(profile, plan_for)
    if crossover is None:
        print("# diffusion is not estimated faster than AR for any output length up to 4096 tokens here")
    else:
        print(f"# diffusion is estimated faster than AR from {crossover} output tokens on")
    return 0


def _progress_bar(fraction: float, label: str) -> None:
    if not sys.stderr.isatty():
        return
    filled = int(fraction * 30)
    sys.stderr.write(f"\r\033[K[{'#' * filled}{'.' * (30 - filled)}] {fraction:4.0%} {label}")
    if fraction >= 1.0:
        sys.stderr.write("\n")
    sys.stderr.flush()


def cmd_training_data(args: argparse.Namespace) -> int:
    from app.training_data import make_pairs

    service = _service()

    def report(done: int, total: int, tokens: int) -> None:
        print(f"\r{done}/{total} drafts, {tokens} tokens", end="", file=sys.stderr, flush=True)

    written = make_pairs(
        service.completion_engine(),
        Path(args.out),
        args.count,
        seed=args.seed,
        max_tokens=args.max_tokens,
        temperature=args.temperature,
        parallel=args.parallel,
        progress=report,
    )
    print(f"\nwrote {written} new drafts to {args.out}", file=sys.stderr)
    return 0


def cmd_config(args: argparse.Namespace) -> int:
    path = sharpen_paths().config_file
    if args.action == "path":
        print(path)
    elif args.action == "show":
        print(render_config(load_config(path)), end="")
    else:
        value = set_value(path, args.key, args.value)
        print(f"{args.key} = {json.dumps(value)}  ({path})")
    return 0


def _gb(size: int) -> str:
    return f"{size / 1e9:.1f} GB" if size >= 1e9 else f"{size / 1e6:.0f} MB"


def cmd_models(args: argparse.Namespace) -> int:
    action = getattr(args, "action", None) or "list"
    return {"list": _models_list, "pull": _models_pull, "rm": _models_rm, "info": _models_info, "use": _models_use}[
        action
    ](args)


def _models_list(args: argparse.Namespace) -> int:
    statuses = _service().models()
    if args.json:
        print(json.dumps([{**asdict(s), "path": str(s.path) if s.path else None} for s in statuses], indent=2))
        return 0
    for status in statuses:
        if status.present and status.size_bytes:
            state = _gb(status.size_bytes)
        else:
            state = f"get {_gb(status.download_bytes)}" if status.source.startswith("hf:") else "missing"
        used = f"  [in use for {', '.join(status.in_use_for)}]" if status.in_use_for else ""
        fit = "" if status.fits else "  (too big for this machine)"
        print(f"{status.name:26} {status.role:9} {status.engine:16} {state:>11}{used}{fit}")
        print(f"    {status.description}")
    print("\n`sharpen models pull NAME` downloads one; `sharpen models use NAME --for draft|complete` switches.")
    return 0


class _ProgressLine:
    """One progress line on stderr: redrawn in place on a terminal, every 10% otherwise."""

    def __init__(self) -> None:
        self.tty = sys.stderr.isatty()
        self.started = time.monotonic()
        self.last_decile: dict[str, int] = {}

    def __call__(self, event: PullProgress) -> None:
        total = event.total_bytes or 0
        share = event.done_bytes / total if total else 0.0
        rate = event.done_bytes / max(1e-6, time.monotonic() - self.started)
        line = (
            f"{event.model}: {event.file} [{event.file_index}/{event.file_count}] {share:6.1%} "
            f"{_gb(event.done_bytes)} of {_gb(total) if total else '?'} ({rate / 1e6:.1f} MB/s)"
        )
        if self.tty:
            print(f"\r{line}\x1b[K", end="", file=sys.stderr, flush=True)
            return
        decile = int(share * 10)
        if self.last_decile.get(event.file, -1) < decile:
            self.last_decile[event.file] = decile
            print(line, file=sys.stderr, flush=True)

    def finish(self) -> None:
        if self.tty:
            print(file=sys.stderr)


def _models_pull(args: argparse.Namespace) -> int:
    progress = _ProgressLine()
    try:
        result = _service().pull_model(args.name, offline=args.offline, force=args.force, progress=progress)
    finally:
        progress.finish()
    fetched = f"downloaded {result.downloaded_files} file(s)" if result.downloaded_files else "already in the cache"
    print(f"{args.name}: {fetched}, {_gb(result.bytes_on_disk)}, {result.verified_files} file(s) verified")
    print(result.path)
    return 0


def _models_rm(args: argparse.Namespace) -> int:
    freed = _service().remove_model(args.name)
    print(f"{args.name}: {'removed, ' + _gb(freed) + ' freed' if freed else 'was not downloaded; nothing to remove'}")
    return 0


def _models_info(args: argparse.Namespace) -> int:
    info = _service().model_info(args.name)
    if args.json:
        print(json.dumps(info, indent=2, default=str))
        return 0
    for key, value in info.items():
        if key == "file" and isinstance(value, dict):
            print("file:")
            for inner, detail in value.items():
                print(f"  {inner:22} {detail}")
        else:
            print(f"{key:24} {value}")
    return 0


def _models_use(args: argparse.Namespace) -> int:
    service = _service()
    service.use_model(args.role, args.name, force=args.force)
    print(f"models.{args.role} = {args.name}")
    if args.force and service.config.models.check_fit:
        set_value(service.paths.config_file, "models.check_fit", "false")
        print(
            "models.check_fit = false  (forced: Sharpen will load it without the fit check; "
            "`sharpen config set models.check_fit true` restores the check)"
        )
    return 0


def cmd_inspect(args: argparse.Namespace) -> int:
    path = Path(args.path).expanduser()
    summary = inspect_checkpoint(path).summary() if path.is_dir() else inspect_gguf(path).summary()
    if args.json:
        print(json.dumps(summary, indent=2, default=str))
    else:
        for key, value in summary.items():
            print(f"{key:24} {value}")
    return 0


def cmd_doctor(args: argparse.Namespace) -> int:
    from app.doctor import diagnose, render

    report = diagnose()
    print(json.dumps(report.as_dict(), indent=2) if args.json else render(report), end="\n" if args.json else "")
    return 0 if report.ok else EXIT_ERROR


def _log_verbosely() -> None:
    logging.basicConfig(level=logging.DEBUG, format="%(name)s: %(message)s")
    llama_logger = logging.getLogger("sharpen.llama_cpp")
    llama_logger.propagate = True


def _add_draft_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--tokens",
        type=setting_flag("diffusion.tokens"),
        metavar="N",
        help="draft length in tokens (config: diffusion.tokens)",
    )
    parser.add_argument(
        "--steps", type=setting_flag("diffusion.steps"), metavar="K", help="refinement passes (config: diffusion.steps)"
    )
    parser.add_argument("--schedule", choices=SCHEDULES, help="blocks (LLaDA) or timestep (Dream)")
    parser.add_argument(
        "--block-length",
        type=setting_flag("diffusion.block_length"),
        metavar="B",
        help="block length for the blocks schedule",
    )
    parser.add_argument(
        "--threshold",
        type=setting_flag("diffusion.threshold"),
        metavar="T",
        help="commit every position this confident; 0 is off",
    )
    parser.add_argument("--algorithm", choices=ALGORITHMS, help="which masked positions to commit first")
    parser.add_argument("--eos", choices=EOS_RULES, help="where end-of-text may settle (config: diffusion.eos)")
    parser.add_argument(
        "--spacing",
        type=setting_flag("diffusion.spacing"),
        metavar="D",
        help="no two positions this close settle in one pass (diffusion.spacing)",
    )
    parser.add_argument("--temperature", type=setting_flag("diffusion.temperature"), help="0 is greedy")
    parser.add_argument(
        "--top-k", type=setting_flag("diffusion.top_k"), help="sample among the k most likely tokens; 0 is off"
    )
    parser.add_argument(
        "--top-p", type=setting_flag("diffusion.top_p"), help="sample within this probability mass; 1 is off"
    )
    parser.add_argument("--seed", type=setting_flag("diffusion.seed"), help="the same seed repeats a draft exactly")
    parser.add_argument("--trace", metavar="FILE", help="save every refinement pass to FILE (JSON Lines)")
    parser.add_argument("--stream", action="store_true", help="print the settled start of the draft as it grows")
    parser.add_argument("--json", action="store_true", help="print the text, passes and timings as JSON")
    parser.add_argument("--engine", choices=ENGINES, help="force an engine instead of asking the router")
    parser.add_argument("--policy", choices=POLICIES, help="routing policy (config: router.policy)")
    parser.add_argument("--quality", choices=QUALITIES, help="passes per token preset (config: router.quality)")


def command_names(parser: argparse.ArgumentParser) -> set[str]:
    for action in parser._subparsers._group_actions if parser._subparsers else []:
        if isinstance(action, argparse._SubParsersAction):
            return set(action.choices)
    return set()


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="sharpen",
        usage="sharpen [FILE] | sharpen COMMAND ...",
        epilog="With no command, or with a FILE, Sharpen opens its editor (the TUI).",
        description="A local, offline writing assistant: autocomplete from a llama.cpp model, "
        "drafts from a diffusion model.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {version('sharpen')}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log what the engines do, llama.cpp included")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", prog="sharpen")

    complete = commands.add_parser("complete", help="continue a text (what ghost-text autocomplete shows)")
    complete.add_argument("text", help="the text to continue; '-' reads standard input")
    complete.add_argument("--suffix", help="text after the cursor (used where the model supports fill-in-the-middle)")
    complete.add_argument(
        "--max-tokens",
        type=setting_flag("complete.max_tokens"),
        help="longest continuation (config: complete.max_tokens)",
    )
    complete.add_argument(
        "--temperature", type=setting_flag("complete.temperature"), help="0 is greedy (config: complete.temperature)"
    )
    complete.add_argument("--stop", action="append", metavar="TEXT", help="stop before this text (repeatable)")
    complete.add_argument("--no-trim", action="store_true", help="fail instead of dropping text that does not fit")
    complete.add_argument("--json", action="store_true", help="print the text, token counts and timings as JSON")
    complete.set_defaults(handler=cmd_complete)

    chat = commands.add_parser("chat", help="answer a short instruction with the model's chat template")
    chat.add_argument("text", help="the instruction; '-' reads standard input")
    chat.add_argument(
        "--max-tokens", type=setting_flag("chat.max_tokens"), help="longest reply (config: chat.max_tokens)"
    )
    chat.add_argument(
        "--temperature", type=setting_flag("chat.temperature"), help="0 is greedy (config: chat.temperature)"
    )
    chat.add_argument("--json", action="store_true", help="print the text, token counts and timings as JSON")
    chat.set_defaults(handler=cmd_chat)

    draft = commands.add_parser("draft", help="draft a longer text with the diffusion engine")
    draft.add_argument("prompt", help="what to write; '-' reads standard input")
    draft.add_argument("--no-chat", action="store_true", help="use the prompt as plain text, without the chat template")
    _add_draft_options(draft)
    draft.set_defaults(handler=cmd_draft)

    infill = commands.add_parser("infill", help="write text between two pieces of text (rewrite a selection)")
    infill.add_argument("--before", required=True, help="the text before the gap")
    infill.add_argument("--after", required=True, help="the text after the gap")
    _add_draft_options(infill)
    infill.set_defaults(handler=cmd_infill)

    route = commands.add_parser("route", help="show which engine would serve a request, and why")
    route.add_argument("--kind", choices=KINDS, required=True)
    route.add_argument(
        "--tokens", type=checked_flag(int, at_least(1)), required=True, metavar="N", help="expected output length"
    )
    route.add_argument(
        "--prompt-tokens",
        type=checked_flag(int, at_least(0)),
        default=32,
        metavar="P",
        help="context read before writing",
    )
    route.add_argument(
        "--suffix-tokens",
        type=checked_flag(int, at_least(0)),
        default=0,
        metavar="S",
        help="context after an infill gap",
    )
    route.add_argument("--stream", action="store_true", help="the output must appear token by token")
    route.add_argument(
        "--budget",
        type=setting_flag("router.latency_budget_s"),
        metavar="SECONDS",
        help="latency budget (config: router.latency_budget_s)",
    )
    route.add_argument("--policy", choices=POLICIES, help="config: router.policy")
    route.add_argument("--quality", choices=QUALITIES, help="config: router.quality")
    route.add_argument("--engine", choices=ENGINES, help="force an engine")
    route.add_argument("--explain", action="store_true", help="show every estimate and the settings")
    route.add_argument("--json", action="store_true")
    route.set_defaults(handler=cmd_route)

    calibrate = commands.add_parser("calibrate", help="measure the engines on this machine for the router")
    calibrate.add_argument("--show", action="store_true", help="print the saved profile without measuring")
    calibrate.add_argument("--quick", action="store_true", help="a smaller, faster measurement")
    calibrate.set_defaults(handler=cmd_calibrate)

    replay = commands.add_parser("replay", help="open the playback of a saved refinement trace")
    replay.add_argument("trace", help="a trace file saved by `sharpen draft --trace` or the TUI")
    replay.set_defaults(handler=cmd_replay)

    data = commands.add_parser(
        "training-data", help="(development) write instruction -> draft pairs with the AR model, for training"
    )
    data.add_argument("--out", default="models/training/data/drafts.jsonl", help="JSON Lines file, appended to")
    data.add_argument(
        "--count",
        type=checked_flag(int, at_least(1)),
        default=1000,
        help="how many instructions (resumes where it stopped)",
    )
    data.add_argument("--seed", type=checked_flag(int, at_least(0)), default=0, help="which list of instructions")
    data.add_argument("--max-tokens", type=checked_flag(int, at_least(1)), default=160)
    data.add_argument(
        "--temperature",
        type=checked_flag(float, between(0.0, 2.0)),
        default=0.0,
        help="0: greedy, written several at a time",
    )
    data.add_argument(
        "--parallel", type=checked_flag(int, at_least(1)), default=16, help="greedy drafts decoded together"
    )
    data.set_defaults(handler=cmd_training_data)

    config = commands.add_parser("config", help="show or change settings")
    config_actions = config.add_subparsers(dest="action", metavar="ACTION", required=True)
    config_actions.add_parser("path", help="print the config file's path")
    config_actions.add_parser("show", help="print every setting in effect")
    config_set = config_actions.add_parser("set", help="change one setting")
    config_set.add_argument("key", help="a dotted key, e.g. ar.n_ctx")
    config_set.add_argument("value")
    config.set_defaults(handler=cmd_config)

    models = commands.add_parser("models", help="list, download, inspect, remove and switch models")
    models.add_argument("--json", action="store_true")
    models.set_defaults(handler=cmd_models, action="list")
    model_actions = models.add_subparsers(dest="action")
    listing = model_actions.add_parser("list", help="the models Sharpen knows, which are present, which fit")
    listing.add_argument("--json", action="store_true")
    pull = model_actions.add_parser("pull", help="download a model from the Hugging Face Hub into the HF cache")
    pull.add_argument("name")
    pull.add_argument("--offline", action="store_true", help="use only the local cache (as HF_HUB_OFFLINE=1)")
    pull.add_argument("--force", action="store_true", help="download even if it does not fit this machine")
    remove_model = model_actions.add_parser("rm", help="delete a downloaded model from the HF cache")
    remove_model.add_argument("name")
    info = model_actions.add_parser("info", help="everything about one model: source, size, needs, file details")
    info.add_argument("name")
    info.add_argument("--json", action="store_true")
    use = model_actions.add_parser("use", help="serve a role with a model (validated first)")
    use.add_argument("name")
    use.add_argument("--for", dest="role", required=True, choices=("draft", "complete"))
    use.add_argument("--force", action="store_true", help="use it even if it does not fit this machine")

    inspect = commands.add_parser("inspect", help="show what a GGUF file or a checkpoint folder says about itself")
    inspect.add_argument("path")
    inspect.add_argument("--json", action="store_true")
    inspect.set_defaults(handler=cmd_inspect)

    doctor = commands.add_parser(
        "doctor", help="check the build, the CPU, the models, the calibration and the config; name each fix"
    )
    doctor.add_argument("--json", action="store_true", help="everything found, for a bug report")
    doctor.set_defaults(handler=cmd_doctor)
    return parser


def run_tui(document: Path | None = None, trace: Path | None = None) -> int:
    """Open the TUI (Textual is imported here, so the other commands start without it)."""
    from ui.app import SharpenApp

    SharpenApp(_service(), document=document, trace=trace).run()
    return 0


def cmd_replay(args: argparse.Namespace) -> int:
    load_trace(args.trace)  # a bad file fails here, with a clear message, before the screen opens
    return run_tui(trace=Path(args.trace))


def main(argv: Sequence[str] | None = None) -> int:
    try:
        code = _main(argv)
        sys.stdout.flush()  # here, not at exit, so a closed pipe is met where it can be handled
        return code
    except BrokenPipeError:
        # The reader went away (`sharpen route ... | head -1`): stop quietly, as Unix tools do.
        _silence_stdout()
        return EXIT_BROKEN_PIPE


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's last flush does not fail on the closed pipe."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass  # stdout is not a real file (captured by a test): nothing will flush into the pipe


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    commands = command_names(parser)
    if not argv or (not argv[0].startswith("-") and argv[0] not in commands):
        if len(argv) > 1:
            return _fail(
                f"unknown command {argv[0]!r}; `sharpen FILE` opens a file, `sharpen --help` lists the commands",
                EXIT_USAGE,
            )
        document = Path(argv[0]).expanduser() if argv else None
        return _guarded(lambda: run_tui(document), verbose=False)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit:  # --help, --version, or a usage error already reported in one line
        return exit.code if isinstance(exit.code, int) else EXIT_USAGE
    if args.command is None:
        parser.print_help()
        return 0
    if args.verbose:
        _log_verbosely()
    return _guarded(lambda: args.handler(args), verbose=args.verbose)


def _guarded(command: Callable[[], int], *, verbose: bool) -> int:
    """Run a command; whatever goes wrong is one `sharpen: error:` line on stderr, never a traceback."""
    try:
        return command()
    except SharpenError as error:
        return _fail(str(error))
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        raise
    except UnicodeDecodeError:
        return _fail("the input is not UTF-8 text")
    except OSError as error:
        where = f" ({error.filename})" if error.filename else ""
        return _fail(f"{error.strerror or error}{where}")
    except Exception as error:
        if verbose:
            raise
        return _fail(
            f"unexpected {type(error).__name__}: {error}. This is a bug in Sharpen: `sharpen -v ...` shows where; "
            "please report it with the output of `sharpen doctor --json`"
        )


def _fail(message: str, code: int = EXIT_ERROR) -> int:
    print(f"sharpen: error: {message}", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
