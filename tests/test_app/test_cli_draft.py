"""`sharpen draft` and `sharpen infill` on a tiny real diffusion GGUF."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.cli import main
from engines.trace import load_trace


@pytest.fixture
def draft_model(tiny_cacheable_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    assert main(["config", "set", "models.draft", str(tiny_cacheable_path)]) == 0
    assert main(["config", "set", "router.policy", "quality"]) == 0  # always diffusion, whatever the costs
    capsys.readouterr()
    return tiny_cacheable_path


def test_draft_prints_text_and_stats(draft_model: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["draft", "Write a note to Sam.", "--tokens", "32", "--steps", "8"]) == 0
    out, err = capsys.readouterr()
    assert out.strip()
    assert "32 tokens in 8 passes" in err and "ms/pass" in err and "tokens/s" in err


def test_draft_json_and_trace(draft_model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "t.jsonl"
    args = ["draft", "Write a note.", "--tokens", "32", "--block-length", "16", "--steps", "8"]
    assert main([*args, "--json", "--trace", str(trace), "--algorithm", "margin"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["passes"] == 8 and payload["tokens"]["canvas"] == 32
    assert payload["settings"]["algorithm"] == "margin" and payload["settings"]["block_length"] == 16
    assert payload["timings"]["ms_per_pass"] > 0 and 0 <= payload["timings"]["sampler_share"] < 1
    loaded = load_trace(trace)
    assert len(loaded.passes) == 8 and loaded.text == payload["text"] and loaded.header.prompt == "Write a note."


def test_stream_prints_the_settled_prefix_then_the_rest(draft_model: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["draft", "Write a note.", "--tokens", "24", "--steps", "24", "--json", "--engine", "diffusion"]) == 0
    text = json.loads(capsys.readouterr().out)["text"]
    assert main(["draft", "Write a note.", "--tokens", "24", "--steps", "24", "--stream", "--engine", "diffusion"]) == 0
    assert capsys.readouterr().out == text + "\n"


def test_threshold_from_config_and_flag(draft_model: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "set", "diffusion.threshold", "0.5"]) == 0
    capsys.readouterr()
    assert main(["draft", "Hi", "--tokens", "32", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["settings"]["threshold"] == 0.5
    assert main(["draft", "Hi", "--tokens", "32", "--threshold", "0", "--steps", "4", "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["settings"]["threshold"] is None and payload["passes"] == 4


def test_infill(draft_model: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(
            [
                "infill",
                "--before",
                "Dear Sam,",
                "--after",
                "Best, Ana",
                "--tokens",
                "12",
                "--json",
                "--engine",
                "diffusion",
            ]
        )
        == 0
    )
    payload = json.loads(capsys.readouterr().out)
    assert payload["tokens"]["canvas"] == 12 and payload["text"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["draft", "Hi", "--tokens", "64", "--steps", "1"], "must be at least the number of blocks"),
        (["draft", "   "], "the prompt is empty"),
        (["draft", "Hi", "--tokens", "4000"], "raise diffusion.n_ctx"),
        (["infill", "--before", "", "--after", " "], "the prompt is empty"),
    ],
)
def test_bad_draft_requests(
    draft_model: Path, args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(args) == 1
    err = capsys.readouterr().err
    assert "sharpen: error: " in err and message in err and "Traceback" not in err


def test_an_ar_model_as_draft_model(embedded_model_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "set", "models.draft", "smollm2-135m-instruct"]) == 0
    assert main(["draft", "Write a note.", "--engine", "diffusion"]) == 1
    assert "not a diffusion model" in capsys.readouterr().err


def test_unwritable_trace_path(draft_model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert (
        main(
            [
                "draft",
                "Hi",
                "--tokens",
                "8",
                "--steps",
                "8",
                "--engine",
                "diffusion",
                "--trace",
                str(blocker / "t.jsonl"),
            ]
        )
        == 1
    )
    out, err = capsys.readouterr()
    assert out.strip(), "the draft is printed even though its trace could not be saved"
    assert "cannot write the trace" in err


def test_eos_rule_from_config_and_flag(draft_model: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["draft", "Hi", "--tokens", "32", "--steps", "4", "--engine", "diffusion", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["settings"]["eos"] == "in_order"
    assert (
        main(["draft", "Hi", "--tokens", "32", "--steps", "4", "--engine", "diffusion", "--eos", "free", "--json"]) == 0
    )
    assert json.loads(capsys.readouterr().out)["settings"]["eos"] == "free"
    assert main(["config", "set", "diffusion.eos", "last"]) == 0
    capsys.readouterr()
    assert main(["draft", "Hi", "--tokens", "32", "--steps", "4", "--engine", "diffusion", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["settings"]["eos"] == "last"
    assert main(["config", "set", "diffusion.eos", "sometimes"]) != 0
    assert "in_order" in capsys.readouterr().err


def test_spacing_from_config_and_flag(draft_model: Path, capsys: pytest.CaptureFixture[str]) -> None:
    draft = ["draft", "Hi", "--tokens", "32", "--steps", "8", "--engine", "diffusion", "--json"]
    assert main(draft) == 0
    assert json.loads(capsys.readouterr().out)["settings"]["spacing"] == 3
    assert main([*draft, "--spacing", "0"]) == 0
    assert json.loads(capsys.readouterr().out)["settings"]["spacing"] == 0
    assert main(["config", "set", "diffusion.spacing", "1"]) == 0
    capsys.readouterr()
    assert main(draft) == 0
    assert json.loads(capsys.readouterr().out)["settings"]["spacing"] == 1
    assert main(["config", "set", "diffusion.spacing", "-2"]) != 0
    assert "between 0 and 64" in capsys.readouterr().err
    assert main([*draft, "--spacing", "-1"]) != 0
    assert "--spacing: must be between 0 and 64" in capsys.readouterr().err, "the same check as the setting"


def test_draft_in_a_document_reports_the_context(
    draft_model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    document = tmp_path / "reply.txt"
    document.write_text("Hi Sam,\n\nThanks for the invitation.\n\nBest,\nAna\n")
    at = len("Hi Sam,\n\nThanks for the invitation.\n\n")
    args = ["draft", "decline politely", "--context", str(document), "--at", str(at), "--tokens", "32", "--json"]
    assert main(args) == 0
    payload = json.loads(capsys.readouterr().out)
    context = payload["context"]
    assert context["before_chars"] == at and context["after_chars"] == len("Best,\nAna\n")
    assert context["left_out_before_chars"] == 0 and context["left_out_after_chars"] == 0
    # The document before the cursor is in the prompt: it is longer than the instruction's alone.
    assert main(["draft", "decline politely", "--tokens", "32", "--json"]) == 0
    alone = json.loads(capsys.readouterr().out)
    assert "context" not in alone and context["tokens"] > 0
    assert payload["tokens"]["prompt"] > alone["tokens"]["prompt"]


def test_a_long_document_is_cut_and_the_cli_says_so(
    draft_model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    document = tmp_path / "long.txt"
    document.write_text("".join(f"Paragraph {n} of the minutes.\n\n" for n in range(600)))
    assert main(["draft", "a closing line", "--context", str(document), "--tokens", "32"]) == 0
    _out, err = capsys.readouterr()
    assert "sharpen: note: the model's context held" in err and "characters before the cursor" in err
    assert main(["draft", "a closing line", "--context", str(document), "--tokens", "32", "--json"]) == 0
    context = json.loads(capsys.readouterr().out)["context"]
    assert context["left_out_before_chars"] > 0 and context["before_chars"] > 0


def test_infill_with_an_instruction_rewrites_the_selection(
    draft_model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["infill", "--before", "Dear Sam, ", "--after", " Best, Ana", "--tokens", "32", "--json"]
    assert main([*args, "--instruction", "more formal", "--selection", "thanks a lot for the flowers"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["engine"] == "diffusion" and payload["tokens"]["canvas"] == 32
    assert main([*args, "--instruction", "more formal"]) == 2
    assert "--instruction rewrites a text: give it with --selection TEXT" in capsys.readouterr().err


# Under 30 tokens a draft is short: the router sends it to AR whatever the policy.
SHORT = ["--tokens", "16"]


def test_an_option_only_diffusion_reads_drafts_with_diffusion_and_says_so(
    draft_model: Path, embedded_model_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["draft", "Write a short thank-you note.", *SHORT, "--seed", "1"]) == 0
    assert "sharpen: AR: 16 tokens is short" in capsys.readouterr().err, "an option both engines read pins nothing"
    trace = tmp_path / "t.jsonl"
    assert main(["draft", "Write a short thank-you note.", *SHORT, "--threshold", "0.9", "--trace", str(trace)]) == 0
    _out, err = capsys.readouterr()
    assert "sharpen: diffusion: --threshold is read only by the diffusion engine" in err
    assert load_trace(trace).header.settings["threshold"] == 0.9
    assert main(["infill", "--before", "Dear Sam,", "--after", "Ana", *SHORT, "--steps", "4"]) == 0
    _out, err = capsys.readouterr()
    assert "sharpen: diffusion: --steps is read only by the diffusion engine;" in err and "in 4 passes" in err


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            ["--threshold", "0.9"],
            "--engine asks for the AR engine, but --threshold is read only by the diffusion engine",
        ),
        (["--trace", "t.jsonl", "--no-repeat-ngram", "3"], "but --no-repeat-ngram is read only by the"),
    ],
)
def test_an_option_that_contradicts_the_engine_asked_for_is_one_error_line(
    draft_model: Path,
    flags: list[str],
    message: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["draft", "Write a short thank-you note.", "--engine", "ar", *flags]) == 1
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("sharpen: error: ") and message in err and err.count("\n") == 1
    assert not Path("t.jsonl").exists()


def test_the_help_says_which_flags_only_diffusion_reads(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["draft", "--help"]) == 0
    help = " ".join(capsys.readouterr().out.split())
    assert "0 is off (read only by the diffusion engine; config: diffusion.top_k)" in help
    assert "--trace FILE save the draft's trace to FILE (JSON Lines)" in help
    assert "the same seed repeats a draft exactly (config: diffusion.seed)" in help
