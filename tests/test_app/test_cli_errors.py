"""Every subcommand, given bad arguments, says so in one `sharpen: error:` line: no usage dump, no traceback."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest

from app.cli import EXIT_BROKEN_PIPE, command_names, main

ROOT = Path(__file__).resolve().parents[2]

BAD_ARGUMENTS = [
    (["--bogus"], "unrecognized arguments: --bogus"),
    (["dratf", "Write to Sam"], "unknown command 'dratf'"),
    (["complete"], "the following arguments are required: text"),
    (["complete", "Hi", "--max-tokens", "0"], "--max-tokens: must be between 1 and 4096, got 0"),
    (["complete", "Hi", "--temperature", "hot"], "--temperature: must be a number, got 'hot'"),
    (["chat", "Hi", "--max-tokens", "-3"], "--max-tokens: must be between 1 and 8192, got -3"),
    (["draft", "hi", "--tokens", "0"], "--tokens: must be between 1 and 8192, got 0 (as the setting diffusion.tokens)"),
    (["draft", "hi", "--steps", "0"], "--steps: must be at least 1, got 0"),
    (["draft", "hi", "--threshold", "2"], "--threshold: must be between 0.0 and 1.0, got 2.0"),
    (["draft", "hi", "--top-p", "0"], "--top-p: must be between 0.01 and 1.0"),
    (["draft", "hi", "--spacing", "-1"], "--spacing: must be between 0 and 64"),
    (["draft", "hi", "--seed", "x"], "--seed: must be a whole number, got 'x'"),
    (["draft", "hi", "--schedule", "zigzag"], "invalid choice: 'zigzag'"),
    (["draft", "hi", "--at", "3"], "--at needs --context FILE"),
    (["draft", "hi", "--at", "99999", "--context", "README.md"], "is past the end of README.md"),
    (["draft", "hi", "--context", "/no/such/document.txt"], "/no/such/document.txt"),
    (["draft", "hi", "--at", "-1", "--context", "x"], "--at: must be at least 0"),
    (["infill", "--before", "a"], "the following arguments are required: --after"),
    (["infill", "--before", "a", "--after", "b", "--block-length", "0"], "--block-length: must be at least 1"),
    (["route", "--kind", "draft", "--tokens", "0"], "--tokens: must be at least 1, got 0"),
    (["route", "--kind", "nope", "--tokens", "5"], "--kind: invalid choice: 'nope'"),
    (["route", "--kind", "draft", "--tokens", "5", "--budget", "-1"], "--budget: must be at least 0.0"),
    (["route", "--kind", "draft", "--tokens", "5", "--prompt-tokens", "-1"], "--prompt-tokens: must be at least 0"),
    (["calibrate", "--bogus"], "unrecognized arguments: --bogus"),
    (["replay", "/no/such/trace.jsonl"], "/no/such/trace.jsonl"),
    (["compare", "hi", "--repeat", "0"], "--repeat: must be between 1 and 20, got 0"),
    (["compare", "hi", "--export", "both.png"], "cannot export a recording to '.png'"),
    (["compare", " "], "the prompt is empty"),
    (["compare", "hi", "--context", "/no/such/document.txt"], "/no/such/document.txt"),
    (["config"], "the following arguments are required: ACTION"),
    (["config", "set", "ar.n_ctx", "huge"], "ar.n_ctx must be a whole number, got 'huge'"),
    (["config", "set", "nope.key", "1"], "unknown key 'nope.key'"),
    (["models", "pull"], "the following arguments are required: name"),
    (["models", "info", "no-such-model"], "unknown model 'no-such-model'"),
    (["models", "rm", "no-such-model"], "unknown model 'no-such-model'"),
    (["models", "use", "sharpen-draft", "--for", "bogus"], "--for: invalid choice: 'bogus'"),
    (["inspect", "/no/such/model.gguf"], "/no/such/model.gguf"),
    (["doctor", "--bogus"], "unrecognized arguments: --bogus"),
    (["serve", "--port", "0"], "--port: must be between 1 and 65535, got 0 (as the setting server.port)"),
    (["serve", "--queue", "-1"], "--queue: must be between 0 and 1024"),
    (["serve", "--host", "0.0.0.0"], "--host 0.0.0.0 can be reached from other machines: give --api-key KEY"),
]


def test_every_subcommand_is_covered() -> None:
    covered = {args[0] for args, _ in BAD_ARGUMENTS}
    missing = command_names() - covered
    assert not missing, f"add bad-argument cases for {missing}"


@pytest.mark.parametrize(("args", "message"), BAD_ARGUMENTS, ids=[" ".join(a) for a, _ in BAD_ARGUMENTS])
def test_bad_arguments_get_one_error_line(args: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(args)
    out, err = capsys.readouterr()
    assert code in (1, 2), f"exit {code}"
    lines = err.splitlines()
    assert len(lines) == 1, f"expected one line on stderr, got:\n{err}"
    assert lines[0].startswith("sharpen: error: ") and message in lines[0], lines[0]
    assert "Traceback" not in err and out == ""


def test_a_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    """`sharpen route ... --explain | head -1`: the reader has gone before the output is written."""
    process = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "route", "--kind", "draft", "--tokens", "400", "--explain"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={"SHARPEN_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
    )
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()  # before the child has imported anything, so its first write meets a closed pipe
    err = process.stderr.read().decode()
    assert process.wait(timeout=60) == EXIT_BROKEN_PIPE
    assert err == "", err


def test_input_that_is_not_utf8_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    stdin = io.TextIOWrapper(io.BytesIO(b"Dear Sam, \xff\xfe"), encoding="utf-8")
    monkeypatch.setattr(sys, "stdin", stdin)
    assert main(["complete", "-", "--max-tokens", "2"]) == 1
    assert capsys.readouterr().err == "sharpen: error: the input is not UTF-8 text\n"
