"""What every `sharpen` command shares: exit codes, one-line usage errors, flags checked as settings are."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from app.service import SharpenService
from app.storage.config import BadValue, Check, SettingSpec, convert_text, settings_registry
from app.storage.documents import NOT_UTF8, read_text_lenient

EXIT_ERROR = 1
EXIT_USAGE = 2
# The arguments that name files, by their dest or metavar (or declared `type=Path`): they keep the bytes that
# are not UTF-8 (as lone surrogates), so that the file opens; every other text argument has them read as U+FFFD.
PATH_ARGUMENTS = frozenset({"context", "trace", "out", "quoted_from", "path", "source"})
PATH_METAVARS = frozenset({"FILE", "PATH", "FOLDER", "DIR"})


@dataclass(frozen=True)
class Command:
    """One `sharpen NAME`: its help line, the function that declares its arguments, and its handler."""

    name: str
    help: str
    arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


class Parser(argparse.ArgumentParser):
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


def read_text(arg: str) -> str:
    return sys.stdin.read() if arg == "-" else arg


def read_text_file(path: Path, what: str) -> str:
    """A text file's text; bytes that are not UTF-8 are read as U+FFFD, with a note naming `what`."""
    text, replaced = read_text_lenient(path)
    if replaced:
        note(f"{what} {NOT_UTF8}")
    return text


def note(message: str) -> None:
    print(f"sharpen: note: {message}", file=sys.stderr)


def service() -> SharpenService:
    return SharpenService.from_environment()


def engine_label(engine: str) -> str:
    return "AR" if engine == "ar" else "diffusion"


def gb(size: int) -> str:
    return f"{size / 1e9:.1f} GB" if size >= 1e9 else f"{size / 1e6:.0f} MB"


def fail(message: str, code: int = EXIT_ERROR) -> int:
    print(f"sharpen: error: {message}", file=sys.stderr)
    return code
