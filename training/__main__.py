"""`python -m training data ...`: the teacher writes instruction -> draft pairs with the AR model (teacher.py).

The other steps run as modules of their own: `python -m training.adapt`, `python -m training.train`,
`python -m training.gpu_payload` (README.md).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from app.cli.common import EXIT_USAGE, Parser, checked_flag, fail
from app.errors import SharpenError
from app.service import SharpenService
from app.storage.config import at_least, between
from training.instruction_sets import INSTRUCTION_SETS

EXIT_INTERRUPTED = 130
DRAFTS = "training/data/drafts.jsonl"


def data_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", default=DRAFTS, help="JSON Lines file, appended to")
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
        default=[DRAFTS],
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


def data(args: argparse.Namespace) -> int:
    from engines.llama_ar import LlamaAREngine
    from training.teacher import instruction_set, make_pairs

    def report(done: int, total: int, tokens: int) -> None:
        print(f"\r{done}/{total} drafts, {tokens} tokens", end="", file=sys.stderr, flush=True)

    service = SharpenService.from_environment()
    engine = service.engines.ar()
    if not isinstance(engine, LlamaAREngine):
        return fail("training data is written by a local AR model: models.complete names a remote one")
    prompts = instruction_set(args.instruction_set, args.count, args.seed, [Path(p) for p in args.quoted_from])
    configured = service.config.chat.no_repeat_ngram
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


def build_parser() -> Parser:
    parser = Parser(prog="python -m training", description="Make the data Sharpen's drafter is trained on.")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    command = commands.add_parser("data", help="write instruction -> draft pairs with the AR model (the teacher)")
    data_arguments(command)
    command.set_defaults(handler=data)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Bad arguments and what the service refuses are one `sharpen: error:` line, as in `sharpen`."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exit:  # --help, or a usage error already reported in one line
        return exit.code if isinstance(exit.code, int) else EXIT_USAGE
    handler: Callable[[argparse.Namespace], int] = args.handler
    try:
        return handler(args)
    except SharpenError as error:
        return fail(str(error))
    except OSError as error:
        return fail(f"{error.strerror or error}{f' ({error.filename})' if error.filename else ''}")
    except KeyboardInterrupt:  # the next run resumes where this one stopped
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
