"""`sharpen complete`, `chat`, `draft` and `infill`: each asks the service once and prints the reply."""

from __future__ import annotations

import argparse
import json
import sys
import typing
from pathlib import Path

from app.cli.common import (
    EXIT_USAGE,
    Command,
    checked_flag,
    engine_label,
    fail,
    read_text,
    read_text_file,
    service,
    setting_flag,
)
from app.domain.draft_request import DraftKind, DraftRequest
from app.domain.option_engines import readers_note
from app.domain.reply import Reply
from app.storage.traces import save_trace
from engines.diffusion.settings import DiffusionSettings
from engines.events import GenerationStats, Pass, Token
from engines.options import at_least, options
from engines.trace import TraceError
from router.request import ENGINES, POLICIES, QUALITIES


def print_reply(reply: Reply, args: argparse.Namespace) -> int:
    """Run a reply, printing it as it comes: an AR reply token by token, a diffusion draft by its settled
    start (`--stream`) or a pass counter (on a terminal); then the text, or JSON, and the stats."""
    as_json, stream = args.json, getattr(args, "stream", False)
    streamed = ""
    live = not as_json and not stream and sys.stderr.isatty()
    for event in reply:
        if isinstance(event, Token) and not as_json:
            sys.stdout.write(event.text)
            sys.stdout.flush()
        elif isinstance(event, Pass) and stream:
            grown = reply.settled_text(event)
            if len(grown) > len(streamed) and grown.startswith(streamed):
                sys.stdout.write(grown[len(streamed) :])
                sys.stdout.flush()
                streamed = grown
        elif isinstance(event, Pass) and live:
            settled = len(event.masked) - sum(event.masked)
            sys.stderr.write(f"\r\033[Kpass {event.index + 1}: {settled}/{len(event.masked)} tokens committed")
            sys.stderr.flush()
    done = reply.done
    assert done is not None, "every stream ends with Done"
    stats = done.stats
    if reply.context is not None and reply.context.note() and not as_json:
        print(f"sharpen: note: {reply.context.note()}", file=sys.stderr)
    checked = reply.checked
    if checked is not None and checked.note() and not as_json:
        print(f"sharpen: note: {checked.note()}", file=sys.stderr)
    # Whichever engine wrote it: a diffusion draft's passes, an AR draft's tokens as they arrived.
    trace_path: Path | None = None
    trace_error: TraceError | None = None
    trace = reply.trace()
    if getattr(args, "trace", None) and trace is not None:
        try:
            save_trace(trace, Path(args.trace))
            trace_path = Path(args.trace)
        except TraceError as error:
            trace_error = error  # reported after the draft itself is out, so the text is never lost
    traced = {"trace": str(trace_path) if trace_path else None} if hasattr(args, "trace") else {}
    if isinstance(stats, GenerationStats):
        print(json.dumps(reply.as_json() | traced) if as_json else "")
        if stats.trimmed_tokens and not as_json:
            print(
                f"sharpen: note: the first {stats.trimmed_tokens} tokens of the text did not fit the context "
                "and were not seen",
                file=sys.stderr,
            )
        if trace_error is not None:
            raise trace_error
        return 0
    if live:
        sys.stderr.write("\r\033[K")
    if as_json:
        print(json.dumps(reply.as_json() | traced))
    elif stream:
        print(done.text[len(streamed) :] if done.text.startswith(streamed) else "\n" + done.text)
    else:
        print(done.text)
    if not as_json:
        print(
            f"{stats.generated_tokens} tokens in {stats.passes} passes, {stats.total_s:.2f} s "
            f"({stats.ms_per_pass:.0f} ms/pass, {stats.tokens_per_s:.1f} tokens/s), {stats.finish_reason}",
            file=sys.stderr,
        )
    if stats.uncached_because and not as_json:
        print(f"sharpen: note: every pass ran in full: {stats.uncached_because}", file=sys.stderr)
    if stats.cache_note and not as_json:
        print(f"sharpen: note: {stats.cache_note}", file=sys.stderr)
    if trace_error is not None:
        raise trace_error
    return 0


def complete_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("text", help="the text to continue; '-' reads standard input")
    parser.add_argument("--suffix", help="text after the cursor (used where the model supports fill-in-the-middle)")
    parser.add_argument(
        "--max-tokens",
        type=setting_flag("complete.max_tokens"),
        help="longest continuation (config: complete.max_tokens)",
    )
    parser.add_argument(
        "--temperature", type=setting_flag("complete.temperature"), help="0 is greedy (config: complete.temperature)"
    )
    parser.add_argument("--stop", action="append", metavar="TEXT", help="stop before this text (repeatable)")
    parser.add_argument("--no-trim", action="store_true", help="fail instead of dropping text that does not fit")
    parser.add_argument("--json", action="store_true", help="print the text, token counts and timings as JSON")


def complete(args: argparse.Namespace) -> int:
    reply = service().complete(
        read_text(args.text),
        args.suffix,
        max_tokens=args.max_tokens,
        stop=args.stop or (),
        temperature=args.temperature,
        trim="error" if args.no_trim else "left",
    )
    return print_reply(reply, args)


def chat_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("text", help="the instruction; '-' reads standard input")
    parser.add_argument(
        "--max-tokens", type=setting_flag("chat.max_tokens"), help="longest reply (config: chat.max_tokens)"
    )
    parser.add_argument(
        "--temperature", type=setting_flag("chat.temperature"), help="0 is greedy (config: chat.temperature)"
    )
    parser.add_argument("--json", action="store_true", help="print the text, token counts and timings as JSON")


def chat(args: argparse.Namespace) -> int:
    reply = service().chat(read_text(args.text), max_tokens=args.max_tokens, temperature=args.temperature)
    return print_reply(reply, args)


# The flags of `draft` and `infill` that are named otherwise than their option (DraftRequest's field).
FLAGS = {"chat": "--no-chat", "record_trace": "--trace"}


def flag_name(option: str) -> str:
    """A draft option as `draft` and `infill` name it: its flag."""
    return FLAGS.get(option, "--" + option.replace("_", "-"))


def _help(text: str, option: str, key: str = "") -> str:
    """A flag's help: what it does, which engine alone reads it, and the setting it overrides."""
    notes = "; ".join(note for note in (readers_note(option), f"config: {key}" if key else "") if note)
    return (f"{text} ({notes})" if notes else text).replace("%", "%%")


def draft_options(parser: argparse.ArgumentParser) -> None:
    """The flags of `draft` and `infill`: one per DiffusionSettings option, then the routing flags."""
    parser.add_argument(
        "--tokens",
        type=setting_flag("diffusion.tokens"),
        metavar="N",
        help=_help("draft length in tokens", "tokens", "diffusion.tokens"),
    )
    hints = typing.get_type_hints(DiffusionSettings)
    for item in options(DiffusionSettings):
        flag, key = flag_name(item.name), f"diffusion.{item.name}"
        help = _help(item.metadata["help"], item.name, key)
        if typing.get_origin(hints[item.name]) is typing.Literal:
            parser.add_argument(flag, choices=typing.get_args(hints[item.name]), help=help)
        else:
            parser.add_argument(flag, type=setting_flag(key), metavar=item.metadata["metavar"] or None, help=help)
    parser.add_argument(
        "--trace",
        metavar="FILE",
        help=_help(
            "save the draft's trace to FILE (JSON Lines): every refinement pass, or every AR token with its time",
            "record_trace",
        ),
    )
    parser.add_argument("--stream", action="store_true", help="print the settled start of the draft as it grows")
    parser.add_argument("--json", action="store_true", help="print the text, passes and timings as JSON")
    parser.add_argument("--engine", choices=ENGINES, help="force an engine instead of asking the router")
    parser.add_argument("--policy", choices=POLICIES, help="routing policy (config: router.policy)")
    parser.add_argument(
        "--quality", choices=QUALITIES, help=_help("passes per token preset", "quality", "router.quality")
    )


def draft_request(
    args: argparse.Namespace,
    kind: DraftKind,
    instruction: str,
    *,
    before: str = "",
    after: str = "",
    selection: str = "",
) -> DraftRequest:
    return DraftRequest(
        kind,
        instruction,
        before=before,
        after=after,
        selection=selection,
        tokens=args.tokens,
        overrides={item.name: getattr(args, item.name) for item in options(DiffusionSettings)},
        engine=args.engine,
        policy=args.policy,
        quality=args.quality,
        chat=not getattr(args, "no_chat", False),
        record_trace=args.trace is not None,
        spelling=flag_name,
    )


def print_draft(request: DraftRequest, args: argparse.Namespace) -> int:
    """Route the request, say why on stderr, and print the reply."""
    reply = service().draft(request)
    if not args.json:
        print(f"sharpen: {engine_label(reply.engine)}: {reply.route.reason}", file=sys.stderr)
    return print_reply(reply, args)


def draft_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("prompt", help="what to write ('' for what belongs at the cursor); '-' reads standard input")
    parser.add_argument(
        "--context", metavar="FILE", help="the document the draft goes into: it is written to fit there"
    )
    parser.add_argument(
        "--at",
        type=checked_flag(int, at_least(0)),
        metavar="OFFSET",
        help="the cursor's position in the document, in characters (default: its end)",
    )
    parser.add_argument(
        "--no-chat",
        action="store_true",
        help=_help("use the prompt as plain text, without the chat template", "chat"),
    )
    draft_options(parser)


def draft(args: argparse.Namespace) -> int:
    instruction = read_text(args.prompt)
    if args.context is None:
        if args.at is not None:
            return fail("--at needs --context FILE: it is a position in that document", EXIT_USAGE)
        if not instruction.strip():
            return fail("the prompt is empty: say what to write, or give --context FILE to write at its cursor")
        return print_draft(draft_request(args, "draft", instruction), args)
    document = read_text_file(Path(args.context).expanduser(), f"--context {args.context}")
    at = len(document) if args.at is None else args.at
    if at > len(document):
        return fail(f"--at {at} is past the end of {args.context} ({len(document)} characters)", EXIT_USAGE)
    return print_draft(draft_request(args, "draft", instruction, before=document[:at], after=document[at:]), args)


def infill_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--before", required=True, help="the text before the gap")
    parser.add_argument("--after", required=True, help="the text after the gap")
    parser.add_argument(
        "--instruction", default="", help="how to rewrite the gap's text, e.g. 'shorter' or 'more formal'"
    )
    parser.add_argument("--selection", default="", help="the text the gap replaces (what --instruction rewrites)")
    draft_options(parser)


def infill(args: argparse.Namespace) -> int:
    if args.instruction.strip() and not args.selection.strip():
        return fail("--instruction rewrites a text: give it with --selection TEXT", EXIT_USAGE)
    request = draft_request(
        args, "infill", args.instruction, before=args.before, after=args.after, selection=args.selection
    )
    return print_draft(request, args)


COMMANDS = (
    Command("complete", "continue a text (what ghost-text autocomplete shows)", complete_arguments, complete),
    Command("chat", "answer a short instruction with the model's chat template", chat_arguments, chat),
    Command("draft", "draft a longer text with the diffusion engine", draft_arguments, draft),
    Command("infill", "write text between two pieces of text (rewrite a selection)", infill_arguments, infill),
)
