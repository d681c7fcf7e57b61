"""The `sharpen` command line, run for real on the embedded model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.cli import main


def sharpen(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run the installed console script, as a user would."""
    script = Path(sys.executable).with_name("sharpen")
    return subprocess.run(
        [str(script), *args], input=stdin, capture_output=True, text=True, timeout=120, env=os.environ.copy()
    )


def test_complete_prints_a_continuation() -> None:
    result = sharpen("complete", "Dear Sam, thanks for", "--max-tokens", "12")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip()
    assert result.stderr == ""


def test_complete_json_has_text_and_timings() -> None:
    result = sharpen("complete", "Dear Sam, thanks for", "--max-tokens", "8", "--json")
    assert result.returncode == 0, result.stderr
    payload = json.loads(result.stdout)
    assert payload["text"].strip()
    assert payload["model"] == "smollm2-135m-instruct"
    assert payload["tokens"]["generated"] == 8
    assert payload["timings"]["total_ms"] >= payload["timings"]["time_to_first_token_ms"] > 0


def test_complete_reads_stdin(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    monkeypatch.setattr(sys, "stdin", io.StringIO("Shopping list:\n- eggs\n-"))
    assert main(["complete", "-", "--max-tokens", "6", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["tokens"]["prompt"] > 5


def test_chat_answers_an_instruction(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["chat", "Say hello to Sam in one short sentence.", "--max-tokens", "24"]) == 0
    assert capsys.readouterr().out.strip()


def test_config_path_show_set(sharpen_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "path"]) == 0
    assert capsys.readouterr().out.strip() == str(sharpen_home / "config" / "config.toml")
    assert main(["config", "set", "complete.max_tokens", "7"]) == 0
    capsys.readouterr()
    assert main(["config", "show"]) == 0
    assert "max_tokens = 7" in capsys.readouterr().out
    assert main(["complete", "Hello there", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["tokens"]["generated"] == 7


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["complete", "  "], "the prompt is empty"),
        (["chat", ""], "the prompt is empty"),
        (["config", "set", "ar.n_ctx", "huge"], "ar.n_ctx must be a whole number"),
        (["config", "set", "ar.nope", "1"], "unknown key 'ar.nope'"),
        (["inspect", "/etc/hostname"], "is not a GGUF file"),
    ],
)
def test_bad_input_fails_cleanly(args: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(args) == 1
    err = capsys.readouterr().err
    assert err.startswith("sharpen: error: ") and message in err
    assert "Traceback" not in err


def test_prompt_longer_than_the_context(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "set", "ar.n_ctx", "256"]) == 0
    long_text = " ".join(f"word{i}" for i in range(400))
    assert main(["complete", long_text, "--no-trim"]) == 1
    assert "more than the context of 256" in capsys.readouterr().err
    assert main(["complete", long_text, "--max-tokens", "4"]) == 0
    assert "did not fit the context" in capsys.readouterr().err


@pytest.mark.parametrize("kind", ["missing", "not-gguf", "truncated", "unknown-arch", "invalid-config"])
def test_bad_models_and_config_through_the_cli(
    kind: str, tmp_path: Path, sharpen_home: Path, truncated_path: Path, unknown_arch_path: Path
) -> None:
    config = sharpen_home / "config" / "config.toml"
    config.parent.mkdir(parents=True)
    model = {
        "missing": tmp_path / "absent.gguf",
        "not-gguf": Path("/etc/hostname"),
        "truncated": truncated_path,
        "unknown-arch": unknown_arch_path,
        "invalid-config": None,
    }[kind]
    if model is None:
        config.write_text("[ar]\nn_ctx = -5\n")
    else:
        config.write_text(f'[models]\ncomplete = "{model}"\n')
    result = sharpen("complete", "Hello")
    assert result.returncode == 1
    expected = {
        "missing": "no such file",
        "not-gguf": "is not a GGUF file",
        "truncated": "is truncated",
        "unknown-arch": "unknown model architecture",
        "invalid-config": f"{config}: ar.n_ctx must be at least 256",
    }[kind]
    assert expected in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


def test_unwritable_config_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "file-not-folder"
    blocker.write_text("")
    monkeypatch.setenv("SHARPEN_HOME", str(blocker))
    assert main(["config", "set", "ar.n_ctx", "1024"]) == 1
    assert "cannot write the config file" in capsys.readouterr().err


def test_models_lists_the_embedded_model(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["models", "--json"]) == 0
    entries = {entry["name"]: entry for entry in json.loads(capsys.readouterr().out)}
    # Ghost text on the embedded model; drafts, rewrites and chat on the writing adapter (models.write).
    assert entries["smollm2-135m-instruct"]["present"]
    assert entries["smollm2-135m-instruct"]["in_use_for"] == ["complete"]
    assert entries["sharpen-write"]["role"] == "write" and entries["sharpen-write"]["in_use_for"] == ["write"]
    assert entries["sharpen-write"]["present"]
    assert entries["sharpen-draft"]["present"] and entries["sharpen-draft"]["in_use_for"] == ["draft"]


def test_inspect_prints_gguf_facts(embedded_model_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", str(embedded_model_path), "--json"]) == 0
    facts = json.loads(capsys.readouterr().out)
    assert facts["architecture"] == "llama" and facts["file_type"] == "Q4_1" and facts["chat_template"] is True


def test_help_and_version() -> None:
    assert "complete" in sharpen("--help").stdout
    assert sharpen("--version").stdout.startswith("sharpen ")
