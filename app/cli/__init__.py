"""The `sharpen` command line (app/cli/main.py builds it from each command's module)."""

from app.cli.main import EXIT_BROKEN_PIPE, build_parser, command_names, main

__all__ = ["EXIT_BROKEN_PIPE", "build_parser", "command_names", "main"]
