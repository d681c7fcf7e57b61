"""AR drafts checked against what their instruction asks (chat.fact_tries): drafted again while a fact is left
out, the best kept, and the reply, the JSON and the CLI say how many tries it took and what is still missing.
Real llama.cpp on the shipped SmolLM2-135M file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.cli import main
from app.domain.asked_stance import takes
from app.domain.draft_check import DraftChecks
from app.domain.draft_request import DraftRequest
from app.orchestration.draft_tries import Tried
from app.orchestration.drafters import continuable, with_reminder, with_sign_off
from app.service import SharpenService
from app.storage.config import load_config
from app.storage.paths import sharpen_paths
from engines.ar_engine import Sampling
from engines.events import Done, GenerationStats, Token

# Facts a 135M model leaves out more often than not: the tries run out, so every path is taken.
ASKED = "Tell Wilhelmina the parcel ZX-40913 comes on Wednesday at 4:15pm, and the fee is €37.20."
LETTER = "Hi Wilhelmina,\n\nThanks for your message about the delivery.\n\n"
INVITATION = "Dear Ms Park,\n\nThank you for the invitation to the gala dinner on the 14th.\n\n"


def service_with(tries: int) -> SharpenService:
    paths = sharpen_paths()
    paths.config_file.parent.mkdir(parents=True, exist_ok=True)
    config = f"[ar]\nn_ctx = 1024\n\n[chat]\nfact_tries = {tries}\n\n[router]\nauto_calibrate = false\n"
    paths.config_file.write_text(config, encoding="utf-8")
    return SharpenService(load_config(paths.config_file), paths)


def test_a_draft_that_leaves_out_asked_facts_is_drafted_again_and_the_best_kept() -> None:
    checks = DraftChecks.of(ASKED)
    assert len(checks.facts) == 5
    reply = service_with(4).draft(DraftRequest("draft", ASKED, before=LETTER, tokens=48, engine="ar"))
    events = list(reply)
    checked = reply.checked
    assert checked is not None and reply.done is not None and isinstance(events[-1], Done)
    text = reply.done.text
    # Only the kept draft's tokens are passed on: what was streamed is what is kept.
    assert "".join(e.text for e in events if isinstance(e, Token)) == text
    assert [arrival.text for arrival in reply.written] == [e.text for e in events if isinstance(e, Token)]
    # The report is the kept text's own verdict; tries stop early only at a draft that passed.
    assert checked.missing == checks.verdict(text).missing and checked.asked == checks.facts
    assert 1 <= checked.kept_try <= checked.tries <= 4
    assert checked.tries == 4 or not checked.missing
    payload = reply.as_json()
    assert payload["checked"]["tries"] == checked.tries
    assert payload["checked"]["facts_missing"] == [fact.said for fact in checked.missing]


def test_the_best_of_more_tries_carries_at_least_as_many_facts_as_the_first() -> None:
    service = service_with(1)
    request = DraftRequest("draft", ASKED, before=LETTER, tokens=48, engine="ar")
    once = service.draft(request)
    once_text = once.text()
    assert once.checked is not None and once.checked.tries == 1
    # The first try is the same greedy draft either way, so more tries can only keep as much or more.
    more = service_with(4).draft(request)
    more.text()
    assert more.checked is not None
    assert len(more.checked.missing) <= len(once.checked.missing)
    assert more.checked.tries > 1 or more.text() == once_text


def test_one_try_streams_as_it_comes_and_an_instruction_without_facts_is_not_checked() -> None:
    service = service_with(1)
    reply = service.draft(DraftRequest("draft", ASKED, tokens=8, engine="ar"))
    events = list(reply)
    assert any(isinstance(e, Token) for e in events) and reply.checked is not None
    plain = service.draft(DraftRequest("draft", "write something cheerful", tokens=8, engine="ar"))
    plain.text()
    assert plain.checked is None and "checked" not in plain.as_json()


def test_the_cli_says_what_is_still_missing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    letter = tmp_path / "letter.txt"
    letter.write_text(LETTER, encoding="utf-8")
    for setting in (("config", "set", "router.auto_calibrate", "false"), ("config", "set", "chat.fact_tries", "2")):
        assert main(list(setting)) == 0
    capsys.readouterr()
    assert main(["draft", "--context", str(letter), "--engine", "ar", "--tokens", "24", "--json", ASKED]) == 0
    payload = json.loads(capsys.readouterr().out)
    checked = payload["checked"]
    assert checked["facts_asked"] == ["Wilhelmina", "ZX-40913", "Wednesday", "4:15pm", "€37.20"]
    assert 1 <= checked["tries"] <= 2
    assert main(["draft", "--context", str(letter), "--engine", "ar", "--tokens", "24", ASKED]) == 0
    out, err = capsys.readouterr()
    notes = [line for line in err.splitlines() if line.startswith("sharpen: note: ")]
    missing = checked["facts_missing"]
    if missing or checked["tries"] > 1:
        assert any(f'still missing "{missing[0]}"' in n if missing else "drafted 2 times" in n for n in notes), err
    assert out.strip() == payload["text"].strip()


def test_a_try_after_one_that_missed_the_stance_opens_with_words_that_take_it() -> None:
    service = service_with(1)
    request = DraftRequest("draft", "say no", before=INVITATION, tokens=12, engine="ar")
    events = list(service.ar._open_draft(request, 12, Sampling(), None, "Unfortunately,").events)
    done = events[-1]
    tokens = [event for event in events if isinstance(event, Token)]
    assert isinstance(done, Done) and done.text.startswith("Unfortunately,") and len(done.text) > len("Unfortunately,")
    assert "".join(token.text for token in tokens) == done.text
    assert [token.index for token in tokens] == list(range(len(tokens))) and tokens[0].token_id == -1

    # Checked: the first try is the model's own; where it does not decline, the next opens with a decline.
    checked_service = service_with(2)
    reply = checked_service.draft(request)
    text = reply.text()
    assert reply.checked is not None and reply.checked.asked == () and not reply.checked.topics
    if reply.checked.tries == 2:
        assert reply.checked.kept_try == 2 and text.startswith("Unfortunately,")
    assert takes("decline", text)


def test_a_try_after_one_that_left_things_out_is_asked_for_them_by_name() -> None:
    asked = "tell Sam the lease doesn't allow dogs but cats are fine"
    checks = DraftChecks.of(asked, "Dear Sam,\n\n")
    request = DraftRequest("draft", asked, before="Dear Sam,\n\n", tokens=32, engine="ar")
    short = checks.verdict("Dogs are not allowed.")
    assert with_reminder(request, short).instruction == f"{asked} (Be sure to mention: Sam, lease, cats.)"
    # A draft that says everything changes nothing.
    enough = checks.verdict("Sam, dogs are not allowed under the lease, but cats are fine.")
    assert enough.mentions_enough and with_reminder(request, enough).instruction == asked


def test_a_try_after_a_draft_that_left_facts_out_carries_it_on_from_before_its_sign_off() -> None:
    checks = DraftChecks.of(ASKED, LETTER)
    text = "Your parcel ZX-40913 comes on Wednesday.\n\nBest regards,\nSam"
    best = Tried(1, [], Done(text, _stats()), checks.verdict(text))
    assert continuable(best) == ("Your parcel ZX-40913 comes on Wednesday.", "\n\nBest regards,\nSam")
    # Not a draft that turned the stance around, copied the prompt back or passed: those start again.
    declined = DraftChecks.of("say no", INVITATION)
    accepted = "Yes, I would love to come."
    assert continuable(Tried(1, [], Done(accepted, _stats()), declined.verdict(accepted))) == ("", "")
    whole = "Wilhelmina, parcel ZX-40913 comes on Wednesday at 4:15pm; the fee is €37.20."
    assert continuable(Tried(1, [], Done(whole, _stats()), checks.verdict(whole))) == ("", "")

    service = service_with(1)
    request = DraftRequest("draft", ASKED, before=LETTER, tokens=24, engine="ar")
    body = "Your parcel ZX-40913 comes on Wednesday."
    events = list(service.ar._open_draft(request, 24, Sampling(min_tokens=6), None, continued=body).events)
    done = events[-1]
    tokens = [event for event in events if isinstance(event, Token)]
    assert isinstance(done, Done) and done.text.startswith(body) and len(done.text) > len(body)
    assert "".join(token.text for token in tokens) == done.text and tokens[0].token_id == -1
    assert [token.index for token in tokens] == list(range(len(tokens)))

    # Checked, a draft that leaves facts out is carried on: the kept draft leaves out no more than the first.
    first = checks.verdict(service_with(1).draft(request).text())
    reply = service_with(3).draft(request)
    reply.text()  # the tries run as the reply is read
    carried = reply.checked
    assert carried is not None
    assert len(carried.missing) + len(carried.topics_missing) <= len(first.missing) + len(first.topics_missing)


def test_a_draft_carried_on_keeps_its_sign_off_after_what_was_added() -> None:
    body, sign_off = "Your parcel ZX-40913 comes on Wednesday.", "\n\nBest regards,\nSam"
    added = [Token(body, -1, 0), Token(" The fee is", 5, 1), Token(" €37.20.", 6, 2)]
    events = list(with_sign_off(iter([*added, Done(body + " The fee is €37.20.", _stats())]), body, sign_off))
    done = events[-1]
    assert isinstance(done, Done) and done.text == body + " The fee is €37.20." + sign_off
    assert "".join(e.text for e in events if isinstance(e, Token)) == done.text
    assert [e.index for e in events if isinstance(e, Token)] == [0, 1, 2, 3]
    # Where what was written on signs off itself, the old sign-off is not added again.
    signed = body + " The fee is €37.20.\n\nKind regards,\nSam"
    assert list(with_sign_off(iter([Done(signed, _stats())]), body, sign_off))[-1] == Done(signed, _stats())


def test_an_opener_after_held_back_white_space_is_followed_by_the_model_s_own_space() -> None:
    service = service_with(1)
    before = "Dear Ms Park,\n\nThank you for the invitation to the gala dinner on the 14th. "
    request = DraftRequest("draft", "say no", before=before, tokens=8, engine="ar")
    done = list(service.ar._open_draft(request, 8, Sampling(), None, "Unfortunately,").events)[-1]
    assert isinstance(done, Done)
    assert done.text.startswith("Unfortunately, ") and not done.text.startswith("Unfortunately,  ")


def _stats() -> GenerationStats:
    return GenerationStats(10, 0, 0, 10, 0.1, 0.2, "eos")
