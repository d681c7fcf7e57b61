"""Each finished draft's length is recorded, and the next routes' estimates are for the length each engine's
drafts are expected to write: the real embedded AR model and a tiny real diffusion GGUF, through the service
and the CLI."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.cli.main import main
from app.domain.draft_request import DraftRequest
from app.service import SharpenService
from app.storage.config import load_config, set_value
from app.storage.paths import sharpen_paths
from engines.cancel import CancelToken
from router.lengths import MIN_DRAFTS, WrittenDraft, load_lengths
from router.request import EngineName, Request

PROMPTS = ("Write a one-line thank-you note to Sam.", "Say hello to Ana in one sentence.", "Write a short reminder.")
ASKED = 200


def service_with(draft_model: Path) -> SharpenService:
    paths = sharpen_paths()
    set_value(paths.config_file, "models.draft", str(draft_model))
    return SharpenService(load_config(paths.config_file), paths)


def finished_draft(service: SharpenService, prompt: str, engine: EngineName) -> WrittenDraft:
    reply = service.draft(DraftRequest("draft", prompt, tokens=ASKED, engine=engine))
    reply.text()
    assert reply.done is not None
    stats = reply.done.stats
    return WrittenDraft(ASKED, stats.generated_tokens, stats.finish_reason in ("eos", "stop"))


def test_finished_drafts_set_the_length_the_next_estimates_are_for(
    tiny_cacheable_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    service = service_with(tiny_cacheable_path)
    drafts = [finished_draft(service, prompt, "ar") for prompt in PROMPTS[:MIN_DRAFTS]]
    book, warning = load_lengths(service.routing.lengths_path)
    assert warning is None
    known = book.of("ar", "draft", "smollm2-135m-instruct")
    assert known.drafts == tuple(drafts)
    assert any(d.ended and d.written < ASKED for d in drafts), "SmolLM2 ends a one-line note by itself"
    expected = round(known.expected(ASKED))
    assert expected < ASKED
    route = service.route(Request("draft", ASKED))
    assert route.estimates["ar"].expected_tokens == expected
    assert route.estimates["diffusion"].expected_tokens is None, "no diffusion draft finished yet"
    asked = service.route(Request("draft", ASKED), as_asked=True)
    assert route.estimates["ar"].seconds < asked.estimates["ar"].seconds
    assert main(["route", "--kind", "draft", "--tokens", str(ASKED), "--explain"]) == 0
    assert f"~{expected} of {ASKED} tokens, as its last drafts ran" in capsys.readouterr().out
    assert main(["calibrate", "--show"]) == 0
    shown = capsys.readouterr().out
    ar_line = f"# AR: a draft of 256 tokens is estimated for ~{known.expected(256):.0f}, as its last {MIN_DRAFTS}"
    assert ar_line in shown
    assert "# diffusion: drafts are estimated for the length asked (0 known)" in shown


def test_a_cancelled_draft_is_not_recorded_and_rewrites_are_their_own_kind(tiny_cacheable_path: Path) -> None:
    service = service_with(tiny_cacheable_path)
    cancel = CancelToken()
    cancel.cancel()
    reply = service.draft(DraftRequest("draft", PROMPTS[0], tokens=ASKED, engine="ar"), cancel=cancel)
    reply.text()
    assert reply.done is not None and reply.done.stats.finish_reason == "cancelled"
    assert not service.routing.lengths_path.exists()
    rewrite = DraftRequest(
        "infill", "more formal", before="Dear team,\n\n", after="\n\nBest", selection="hey folks", tokens=32
    )
    reply = service.draft(rewrite)
    reply.text()
    book = load_lengths(service.routing.lengths_path)[0]
    assert len(book.of(reply.route.engine, "infill", reply.route.model).drafts) == 1
    assert book.of(reply.route.engine, "draft", reply.route.model).drafts == ()
