"""The `sharpen` command line: the parser built from every command's declaration, and one-line errors.

Every command goes through SharpenService, as the TUI does.
"""

from __future__ import annotations

import argparse
import io
import logging
import os
import signal
import sys
from collections.abc import Callable, Sequence
from importlib.metadata import version
from pathlib import Path

from app.cli import compare, models, routing, serve, tools, writing
from app.cli.common import EXIT_USAGE, PATH_ARGUMENTS, PATH_METAVARS, Command, Parser, fail, note
from app.errors import SharpenError
from app.storage.documents import NOT_UTF8, valid_text

EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 128 + getattr(signal, "SIGPIPE", 13)  # Windows has no SIGPIPE

COMMANDS: tuple[Command, ...] = (
    *writing.COMMANDS,
    *compare.COMMANDS,
    *routing.COMMANDS,
    tools.REPLAY,
    tools.CONFIG,
    *models.COMMANDS,
    *serve.COMMANDS,
    tools.DOCTOR,
)


def command_names() -> set[str]:
    return {command.name for command in COMMANDS}


def build_parser() -> Parser:
    parser = Parser(
        prog="sharpen",
        usage="sharpen [FILE] | sharpen COMMAND ...",
        epilog="With no command, or with a FILE, Sharpen opens its editor (the TUI).",
        description="A local, offline writing assistant: autocomplete from a llama.cpp model, "
        "drafts from a diffusion model.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {version('sharpen')}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log what the engines do, llama.cpp included")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", prog="sharpen")
    for command in COMMANDS:
        sub = subparsers.add_parser(command.name, help=command.help)
        command.arguments(sub)
        sub.set_defaults(handler=command.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    if isinstance(sys.stdout, io.TextIOWrapper):
        # A path that is not UTF-8 keeps its bytes (as lone surrogates): printed, it is escaped, as on stderr.
        sys.stdout.reconfigure(errors="backslashreplace")
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
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or (not argv[0].startswith("-") and argv[0] not in command_names()):
        if len(argv) > 1:
            return fail(
                f"unknown command {argv[0]!r}; `sharpen FILE` opens a file, `sharpen --help` lists the commands",
                EXIT_USAGE,
            )
        document = Path(argv[0]).expanduser() if argv else None
        return _guarded(lambda: tools.run_tui(document), verbose=False)
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit:  # --help, --version, or a usage error already reported in one line
        return exit.code if isinstance(exit.code, int) else EXIT_USAGE
    if args.command is None:
        parser.print_help()
        return 0
    make_arguments_valid(parser, args)
    if args.verbose:
        _log_verbosely()
    handler: Callable[..., int] = args.handler
    return _guarded(lambda: handler(args), verbose=args.verbose)


def make_arguments_valid(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Bytes in an argument that are not UTF-8 (which Python hands over as lone surrogates) become U+FFFD,
    with a note naming the argument, before any text reaches a model; a path keeps its bytes, to open its file."""
    declared = _declared_arguments(parser, args)
    for dest, value in vars(args).items():
        name, is_path = declared.get(dest, (dest, dest in PATH_ARGUMENTS))
        if is_path:
            continue
        valid: str | list[str]
        if isinstance(value, str):
            valid, replaced = valid_text(value)
        elif isinstance(value, list) and all(isinstance(item, str) for item in value):
            checked = [valid_text(item) for item in value]
            valid, replaced = [text for text, _ in checked], any(changed for _, changed in checked)
        else:
            continue
        if replaced:
            setattr(args, dest, valid)
            note(f"argument {name} {NOT_UTF8}")


def _declared_arguments(parser: argparse.ArgumentParser, args: argparse.Namespace) -> dict[str, tuple[str, bool]]:
    """Each argument of the command given: its name as argparse's errors say it (`--suffix`, `prompt`), and
    whether it names a file (a dest in PATH_ARGUMENTS, a metavar in PATH_METAVARS, or `type=Path`)."""
    declared: dict[str, tuple[str, bool]] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            chosen = action.choices.get(getattr(args, action.dest, None) or "")
            if chosen is not None:
                declared |= _declared_arguments(chosen, args)
            continue
        name = action.option_strings[-1] if action.option_strings else str(action.metavar or action.dest)
        is_path = action.dest in PATH_ARGUMENTS or action.metavar in PATH_METAVARS or action.type is Path
        declared.setdefault(action.dest, (name, is_path))
    return declared


def _log_verbosely() -> None:
    logging.basicConfig(level=logging.DEBUG, format="%(name)s: %(message)s")
    llama_logger = logging.getLogger("sharpen.llama_cpp")
    llama_logger.propagate = True


def _guarded(command: Callable[[], int], *, verbose: bool) -> int:
    """Run a command; whatever goes wrong is one `sharpen: error:` line on stderr, never a traceback."""
    try:
        return command()
    except SharpenError as error:
        return fail(str(error))
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        raise
    except UnicodeDecodeError:
        return fail("the input is not UTF-8 text")
    except OSError as error:
        where = f" ({error.filename})" if error.filename else ""
        return fail(f"{error.strerror or error}{where}")
    except Exception as error:
        if verbose:
            raise
        return fail(
            f"unexpected {type(error).__name__}: {error}. This is a bug in Sharpen: `sharpen -v ...` shows where; "
            "please report it with the output of `sharpen doctor --json`"
        )
