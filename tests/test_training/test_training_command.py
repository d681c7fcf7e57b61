"""`python -m training data`: bad arguments are one `sharpen: error:` line, as in `sharpen`'s own commands."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from training.__main__ import DRAFTS, build_parser, main

ROOT = Path(__file__).resolve().parents[2]

BAD_ARGUMENTS = [
    (["data", "--count", "0"], "--count: must be at least 1, got 0"),
    (["data", "--temperature", "9"], "--temperature: must be between 0.0 and 2.0, got 9.0"),
    (["data", "--set", "poems"], "--set: invalid choice: 'poems'"),
    (["datta"], "invalid choice: 'datta'"),
    ([], "the following arguments are required: COMMAND"),
]


@pytest.mark.parametrize(("args", "message"), BAD_ARGUMENTS, ids=[" ".join(a) or "nothing" for a, _ in BAD_ARGUMENTS])
def test_bad_arguments_get_one_error_line(args: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(args) == 2
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("sharpen: error: ") and message in lines[0], err
    assert out == ""


def test_the_teacher_writes_into_the_committed_data_by_default() -> None:
    args = build_parser().parse_args(["data"])
    assert args.out == DRAFTS and args.quoted_from == [DRAFTS]
    assert (ROOT / DRAFTS).is_file()
    defaults = {"count": 1000, "seed": 0, "instruction_set": "templated", "max_tokens": 160, "parallel": 16}
    assert {name: getattr(args, name) for name in defaults} == defaults


def test_it_runs_as_a_module_from_the_checkout() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "training", "data", "--help"], capture_output=True, text=True, cwd=ROOT, check=True
    )
    assert "--quoted-from" in result.stdout and "python -m training data" in result.stdout
