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
from router.expected_lengths import MIN_DRAFTS, LengthBook, load_lengths
from router.request import Request

PROMPTS = ("Write a one-line thank-you note to Sam.", "Say hello to Ana in one sentence.", "Write a short reminder.")
ASKED = 200
AR_MODEL = "sharpen-write"  # the writing model: the one drafts run on and calibration measures


def service_with(draft_model: Path) -> SharpenService:
    paths = sharpen_paths()
    set_value(paths.config_file, "models.draft", str(draft_model))
    return SharpenService(load_config(paths.config_file), paths)


def ar_drafts(service: SharpenService, prompts: tuple[str, ...] = PROMPTS) -> list[tuple[int, str]]:
    """Each prompt drafted by AR: the tokens written and why it ended."""
    written: list[tuple[int, str]] = []
    for prompt in prompts:
        reply = service.draft(DraftRequest("draft", prompt, tokens=ASKED, engine="ar"))
        reply.text()
        assert reply.done is not None
        written.append((reply.done.stats.generated_tokens, reply.done.stats.finish_reason))
    return written


def test_finished_drafts_set_the_length_the_next_estimates_are_for(
    tiny_cacheable_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    service = service_with(tiny_cacheable_path)
    finished = ar_drafts(service, PROMPTS[:MIN_DRAFTS])
    assert any(finish == "eos" and tokens < ASKED for tokens, finish in finished), "a one-line note ends by itself"
    book, warning = load_lengths(service.routing.lengths_path)
    assert warning is None
    known = book.of("ar", "draft", AR_MODEL)
    assert [(d.asked, d.written) for d in known.drafts] == [(ASKED, tokens) for tokens, _ in finished]
    assert [d.ended for d in known.drafts] == [finish == "eos" for _, finish in finished]
    expected = round(known.expected(ASKED))
    assert expected < ASKED
    route = service.route(Request("draft", ASKED))
    assert route.estimates["ar"].expected_tokens == expected
    assert route.estimates["diffusion"].expected_tokens is None, "not block-causal: its passes decode all 200"
    asked = service.route(Request("draft", ASKED), as_asked=True)
    assert route.estimates["ar"].seconds < asked.estimates["ar"].seconds
    assert route.estimates["ar"].seconds_as_asked == asked.estimates["ar"].seconds, "what the engines are compared by"
    assert main(["route", "--kind", "draft", "--tokens", str(ASKED), "--explain"]) == 0
    assert f"~{expected} of {ASKED} tokens, as its last drafts ran" in capsys.readouterr().out
    assert main(["calibrate", "--show"]) == 0
    shown = capsys.readouterr().out
    n = service.config.diffusion.tokens
    ar_line = f"# AR: a draft of {n} tokens is expected to write ~{known.expected(n):.0f}, as its last {MIN_DRAFTS}"
    assert ar_line in shown and "# diffusion: a draft of" in shown


def test_the_costs_still_learn_from_the_estimate_at_the_length_written(tiny_cacheable_path: Path) -> None:
    service = service_with(tiny_cacheable_path)
    ar_drafts(service)
    request = DraftRequest("draft", "Write a long letter to Sam about the garden.", tokens=ASKED, engine="ar")
    reply = service.draft(request)
    reply.text()
    assert reply.done is not None
    written = reply.done.stats.generated_tokens
    as_written = service.estimate_as_written(request, service.draft_settings.resolve(), reply)
    at_length = service._draft_route(request, written, service.draft_settings.plan(), as_asked=True)
    assert as_written == at_length.estimates["ar"].seconds
    learnt = service._draft_route(request, written, service.draft_settings.plan())
    if learnt.estimates["ar"].expected_tokens is not None:  # the drafts before end sooner than this one
        assert learnt.estimates["ar"].seconds < as_written


def test_what_is_recorded_and_what_is_not(tiny_cacheable_path: Path) -> None:
    service = service_with(tiny_cacheable_path)
    path = service.routing.lengths_path
    cancel = CancelToken()
    cancel.cancel()
    reply = service.draft(DraftRequest("draft", PROMPTS[0], tokens=ASKED, engine="ar"), cancel=cancel)
    reply.text()
    assert reply.done is not None and reply.done.stats.finish_reason == "cancelled"
    service.draft(DraftRequest("draft", PROMPTS[0], tokens=8, engine="ar")).text()
    assert not path.exists(), "a cancelled draft, and one too short to be routed by its estimates"
    # A draft whose passes the request fixed teaches no costs, but its length counts.
    fixed = DraftRequest("draft", PROMPTS[1], tokens=32, engine="diffusion", overrides={"steps": 8})
    reply = service.draft(fixed)
    reply.text()
    book = load_lengths(path)[0]
    assert len(book.of("diffusion", "draft", reply.route.model).drafts) == 1
    rewrite = DraftRequest(
        "infill", "more formal", before="Dear team,\n\n", after="\n\nBest", selection="hey folks", tokens=32
    )
    reply = service.draft(rewrite)
    reply.text()
    book = load_lengths(path)[0]
    assert len(book.of(reply.route.engine, "infill", reply.route.model).drafts) == 1, "rewrites are their own kind"


def test_a_bad_file_warns_and_is_replaced_by_the_next_draft(
    tiny_cacheable_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    service = service_with(tiny_cacheable_path)
    path = service.routing.lengths_path
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("not [valid toml")
    assert main(["route", "--kind", "draft", "--tokens", str(ASKED)]) == 0
    err = capsys.readouterr().err
    assert err.count("sharpen: warning:") == 1 and "cannot read the draft lengths" in err
    ar_drafts(service, PROMPTS[:1])
    book, warning = load_lengths(path)
    assert warning is None and len(book.of("ar", "draft", AR_MODEL).drafts) == 1


def test_a_file_that_cannot_be_written_loses_the_length_not_the_draft(tiny_cacheable_path: Path) -> None:
    service = service_with(tiny_cacheable_path)
    path = service.routing.lengths_path
    path.mkdir(parents=True)  # a folder where the file should be: nothing can be written there
    reply = service.draft(DraftRequest("draft", PROMPTS[0], tokens=ASKED, engine="ar"))
    assert reply.text() and reply.done is not None and reply.done.stats.finish_reason != "cancelled"
    assert service.routing.draft_lengths()[0] == LengthBook()
