"""The `sharpen` command line. Every command goes through SharpenService, as the TUI does."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict
from importlib.metadata import version
from pathlib import Path
from typing import TextIO

from app.config import load_config, render_config, set_value
from app.paths import sharpen_paths
from app.service import SharpenError, SharpenService
from app.traces import save_trace
from engines.diffusion.settings import ALGORITHMS, SCHEDULES, DiffusionSettings
from engines.diffusion.trace import TraceError
from engines.events import Done, DraftStats, Event, Pass, Token
from models.gguf_info import inspect_gguf

EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


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
    assert done is not None, "every engine stream ends with Done"
    stats = done.stats
    if as_json:
        payload = {
            "text": done.text,
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


def cmd_draft(args: argparse.Namespace) -> int:
    service = _service()
    prompt = _read_text(args.prompt)
    settings = _draft_settings(service, args)
    events = service.draft(prompt, args.tokens, settings, chat=not args.no_chat)
    return _run_draft(service, events, args, prompt, "draft", settings)


def cmd_infill(args: argparse.Namespace) -> int:
    service = _service()
    settings = _draft_settings(service, args)
    events = service.infill(args.before, args.after, args.tokens, settings)
    return _run_draft(service, events, args, f"{args.before}\u2026{args.after}", "infill", settings)


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


def cmd_models(args: argparse.Namespace) -> int:
    statuses = _service().models()
    if args.json:
        print(json.dumps([{**asdict(s), "path": str(s.path) if s.path else None} for s in statuses], indent=2))
        return 0
    for status in statuses:
        state = f"{status.size_bytes / 1e6:.0f} MB" if status.present and status.size_bytes else "missing"
        used = f"  [in use for {', '.join(status.in_use_for)}]" if status.in_use_for else ""
        print(f"{status.name:28} {status.role:9} {status.engine:10} {state:>8}{used}")
        print(f"    {status.description}")
    return 0


def cmd_inspect(args: argparse.Namespace) -> int:
    summary = inspect_gguf(args.path).summary()
    if args.json:
        print(json.dumps(summary, indent=2, default=str))
    else:
        for key, value in summary.items():
            print(f"{key:24} {value}")
    return 0


def _log_verbosely() -> None:
    logging.basicConfig(level=logging.DEBUG, format="%(name)s: %(message)s")
    llama_logger = logging.getLogger("sharpen.llama_cpp")
    llama_logger.propagate = True


def _add_draft_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tokens", type=int, metavar="N", help="draft length in tokens (config: diffusion.tokens)")
    parser.add_argument("--steps", type=int, metavar="K", help="refinement passes (config: diffusion.steps)")
    parser.add_argument("--schedule", choices=SCHEDULES, help="blocks (LLaDA) or timestep (Dream)")
    parser.add_argument("--block-length", type=int, metavar="B", help="block length for the blocks schedule")
    parser.add_argument("--threshold", type=float, metavar="T", help="commit every position this confident; 0 is off")
    parser.add_argument("--algorithm", choices=ALGORITHMS, help="which masked positions to commit first")
    parser.add_argument("--temperature", type=float, help="0 is greedy")
    parser.add_argument("--top-k", type=int, help="sample among the k most likely tokens; 0 is off")
    parser.add_argument("--top-p", type=float, help="sample within this probability mass; 1 is off")
    parser.add_argument("--seed", type=int, help="the same seed repeats a draft exactly")
    parser.add_argument("--trace", metavar="FILE", help="save every refinement pass to FILE (JSON Lines)")
    parser.add_argument("--stream", action="store_true", help="print the settled start of the draft as it grows")
    parser.add_argument("--json", action="store_true", help="print the text, passes and timings as JSON")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sharpen",
        description="A local, offline writing assistant: autocomplete from a llama.cpp model, "
        "drafts from a diffusion model.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {version('sharpen')}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log what the engines do, llama.cpp included")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    complete = commands.add_parser("complete", help="continue a text (what ghost-text autocomplete shows)")
    complete.add_argument("text", help="the text to continue; '-' reads standard input")
    complete.add_argument("--suffix", help="text after the cursor (used where the model supports fill-in-the-middle)")
    complete.add_argument("--max-tokens", type=int, help="longest continuation (config: complete.max_tokens)")
    complete.add_argument("--temperature", type=float, help="0 is greedy (config: complete.temperature)")
    complete.add_argument("--stop", action="append", metavar="TEXT", help="stop before this text (repeatable)")
    complete.add_argument("--no-trim", action="store_true", help="fail instead of dropping text that does not fit")
    complete.add_argument("--json", action="store_true", help="print the text, token counts and timings as JSON")
    complete.set_defaults(handler=cmd_complete)

    chat = commands.add_parser("chat", help="answer a short instruction with the model's chat template")
    chat.add_argument("text", help="the instruction; '-' reads standard input")
    chat.add_argument("--max-tokens", type=int, help="longest reply (config: chat.max_tokens)")
    chat.add_argument("--temperature", type=float, help="0 is greedy (config: chat.temperature)")
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

    config = commands.add_parser("config", help="show or change settings")
    config_actions = config.add_subparsers(dest="action", metavar="ACTION", required=True)
    config_actions.add_parser("path", help="print the config file's path")
    config_actions.add_parser("show", help="print every setting in effect")
    config_set = config_actions.add_parser("set", help="change one setting")
    config_set.add_argument("key", help="a dotted key, e.g. ar.n_ctx")
    config_set.add_argument("value")
    config.set_defaults(handler=cmd_config)

    models = commands.add_parser("models", help="list the models Sharpen knows and which are present")
    models.add_argument("--json", action="store_true")
    models.set_defaults(handler=cmd_models)

    inspect = commands.add_parser("inspect", help="show what a GGUF file says about itself")
    inspect.add_argument("path")
    inspect.add_argument("--json", action="store_true")
    inspect.set_defaults(handler=cmd_inspect)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    if args.verbose:
        _log_verbosely()
    try:
        return args.handler(args)
    except SharpenError as error:
        print(f"sharpen: error: {error}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
