"""Text that is not valid Unicode never reaches a tokenizer (#31): command-line arguments and files whose bytes
are not UTF-8 are read with U+FFFD and a note; a JSON body with a lone surrogate gets a 400 naming the field."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest

from app.cli import main
from app.server.threaded import running_server
from app.service import SharpenService
from app.storage.config import Config
from app.storage.documents import DocumentError, DocumentStore, valid_text
from app.storage.paths import SharpenPaths

ROOT = Path(__file__).resolve().parents[2]
NOTE = "held bytes that are not UTF-8; they were read as U+FFFD"
# A draft that is quick on the tiny model.
SMALL = ["--tokens", "8", "--steps", "2", "--engine", "diffusion", "--json"]


def run_sharpen(*args: str | bytes) -> subprocess.CompletedProcess[bytes]:
    """The real command line in a child process: argv bytes reach Python as the OS gives them."""
    return subprocess.run(
        [sys.executable, "-m", "app.cli", *args], cwd=ROOT, capture_output=True, timeout=300, env=os.environ.copy()
    )


@pytest.fixture
def draft_model(tiny_cacheable_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    assert main(["config", "set", "models.draft", str(tiny_cacheable_path)]) == 0
    capsys.readouterr()
    return tiny_cacheable_path


def test_valid_text_turns_escaped_bytes_and_lone_surrogates_into_replacement_characters() -> None:
    escaped = b"\xff\xfe hello \xc3".decode("utf-8", "surrogateescape")
    assert valid_text(escaped) == ("\ufffd\ufffd hello \ufffd", True)
    assert valid_text("a\ud800b\udfffc") == ("a\ufffdb\ufffdc", True)
    assert valid_text("caf\u00e9 \U0001f600") == ("caf\u00e9 \U0001f600", False)


def test_an_instruction_with_bytes_that_are_not_utf8_is_drafted_with_a_note(draft_model: Path) -> None:
    result = run_sharpen("draft", b"\xff\xfe hello", *SMALL)
    err = result.stderr.decode("utf-8", "replace")
    assert result.returncode == 0, err
    assert f"sharpen: note: argument prompt {NOTE}" in err
    assert "bug in Sharpen" not in err and "Traceback" not in err
    assert json.loads(result.stdout)["tokens"]["canvas"] == 8


def test_options_name_themselves_in_the_note(draft_model: Path) -> None:
    result = run_sharpen("infill", "--before", b"Dear \xe9Sam,", "--after", "Best, Ana", *SMALL)
    err = result.stderr.decode("utf-8", "replace")
    assert result.returncode == 0, err
    assert f"sharpen: note: argument --before {NOTE}" in err and "argument --after" not in err
    assert "bug in Sharpen" not in err


def test_a_context_file_that_is_not_utf8_is_read_with_a_note_and_its_path_keeps_its_bytes(
    draft_model: Path, tmp_path: Path
) -> None:
    # The file's name is not UTF-8 either: the path must keep its bytes for the file to open.
    name = os.fsencode(tmp_path) + b"/letter-\xff.txt"
    with open(name, "wb") as file:
        file.write(b"Dear Sam,\n\nThanks \xe9\xff for the flowers.\n\n")
    result = run_sharpen("draft", "a closing line", "--context", name, *SMALL)
    err = result.stderr.decode("utf-8", "replace")
    assert result.returncode == 0, err
    assert NOTE in err and err.count("sharpen: note:") == 1 and "--context" in err
    assert "bug in Sharpen" not in err and "Traceback" not in err
    payload = json.loads(result.stdout)
    assert payload["context"]["before_chars"] == len("Dear Sam,\n\nThanks \ufffd\ufffd for the flowers.\n\n")


def test_a_document_that_is_not_utf8_opens_with_a_note(tmp_path: Path) -> None:
    document = tmp_path / "notes.txt"
    document.write_bytes(b"caf\xe9\r\nok\n")
    store = DocumentStore(tmp_path / "autosave")
    text, note = store.load(document)
    assert text == "caf\ufffd\nok\n"
    assert "notes.txt" in note and NOTE in note and "saving" in note
    document.write_text("plain\n")
    assert store.load(document) == ("plain\n", "")
    picture = tmp_path / "photo.png"
    picture.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    with pytest.raises(DocumentError, match="NUL bytes, so it is not a text file"):
        store.load(picture)


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A server whose requests are refused before any model loads."""
    service = SharpenService(Config(), SharpenPaths.under(tmp_path_factory.mktemp("served")))
    with running_server(service) as url:
        yield url


def post(base_url: str, path: str, body: str) -> httpx.Response:
    """A body written as JSON text: a lone surrogate is a valid JSON escape (which no client's encoder writes)."""
    return httpx.post(
        f"{base_url}{path}", content=body.encode(), headers={"content-type": "application/json"}, timeout=60
    )


LONE_SURROGATES = [
    (
        "/v1/chat/completions",
        '{"model": "sharpen", "messages": [{"role": "user", "content": "hello\\ud800"}]}',
        "messages[0].content",
        5,
    ),
    (
        "/v1/chat/completions",
        '{"messages": [{"role": "system", "content": "x"}, {"role": "user", "content": [{"type": "text", '
        '"text": "\\udfff"}]}]}',
        "messages[1].content[0].text",
        0,
    ),
    (
        "/v1/chat/completions",
        '{"messages": [{"role": "user", "content": "hi"}], "stop": ["a", "\\udc80"]}',
        "stop[1]",
        0,
    ),
    ("/v1/completions", '{"prompt": "Dear \\ud83d Sam", "max_tokens": 4}', "prompt", 5),
    ("/v1/completions", '{"prompt": ["Dear\\udcff"]}', "prompt[0]", 4),
    ("/v1/completions", '{"prompt": "Dear Sam", "suffix": "\\ude00 Best"}', "suffix", 0),
    (
        "/infill",
        '{"input_extra": [{"text": "a"}, {"text": "bc\\ud800"}], "input_prefix": "x"}',
        "input_extra[1].text",
        2,
    ),
    ("/infill", '{"input_prefix": "def f():", "input_suffix": "\\ud800"}', "input_suffix", 0),
    ("/v1/sharpen/drafts", '{"prompt": "note", "sharpen": {"engine": "diffusion\\udcff"}}', "sharpen.engine", 9),
]


@pytest.mark.parametrize(("path", "body", "param", "at"), LONE_SURROGATES, ids=[case[2] for case in LONE_SURROGATES])
def test_a_lone_surrogate_in_a_body_is_a_400_naming_the_field(
    base_url: str, path: str, body: str, param: str, at: int
) -> None:
    response = post(base_url, path, body)
    assert response.status_code == 400, response.text
    error: dict[str, Any] = response.json()["error"]
    assert error["param"] == param and error["type"] == "invalid_request_error" and error["code"] == "invalid_unicode"
    assert error["message"] == f"{param} is not valid Unicode (a lone surrogate at character {at})"


def test_a_surrogate_pair_is_a_character_not_an_error(base_url: str) -> None:
    # An emoji written as JSON's pair of escapes is valid: the request fails later, on what it is really wrong.
    body = '{"messages": [{"role": "user", "content": "hi \\ud83d\\ude00"}], "sharpen": {"k": 1}}'
    response = post(base_url, "/v1/chat/completions", body)
    assert response.status_code == 400 and "unknown options ['k']" in response.json()["error"]["message"]


def test_a_lone_surrogate_in_a_key_is_a_400(base_url: str) -> None:
    response = post(base_url, "/v1/completions", '{"prompt": "hi", "sharpen": {"\\ud800": 1}}')
    assert response.status_code == 400
    assert response.json()["error"]["param"] == "sharpen" and "a key of sharpen" in response.json()["error"]["message"]
