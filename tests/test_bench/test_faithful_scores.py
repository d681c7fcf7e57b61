"""The faithfulness bench's scores (bench/faithful_scores.py), each a pure function of a draft and its case."""

from __future__ import annotations

import pytest
from faithful_scores import (
    COPIED_RUN,
    copied_back,
    facts_kept,
    framing_lines,
    length_ratio,
    placeholders,
    stance_kept,
    states,
)

from app.domain.context import document_instruction

PRIYA_FACTS = (("Friday",), ("10am", "10 am", "10 a.m.", "10:00"), ("figures", "numbers"))


def test_facts_kept_any_alternative_case_and_whitespace_tolerant() -> None:
    text = "I can't make it then.\nCould we do FRIDAY at 10\n a.m. instead? Please send the latest Figures."
    assert facts_kept(text, PRIYA_FACTS) == [True, True, True]


def test_facts_missing_are_not_kept() -> None:
    text = "I'm glad to hear that you're enjoying your trip to India. I'm happy to help you with your trip."
    assert facts_kept(text, PRIYA_FACTS) == [False, False, False]


def test_a_fact_is_not_found_inside_another_word_or_number() -> None:
    assert not states("The total is 1100 pounds", ["10"])
    assert not states("We will refundable it", ["refund"])
    assert states("It is £10, paid.", ["10"])
    assert states("Friday's review", ["Friday"])
    assert states("a 20-minute slot", ["20-minute"])


def test_a_time_may_carry_am_or_pm() -> None:
    assert states("at 7:15pm sharp", ["7:15"])
    assert states("from 9 a.m. until lunch", ["9"])
    assert states("around 7 pm", ["7"])
    assert not states("on the 7th", ["7"])


def test_typographic_apostrophes_match_plain_ones() -> None:
    assert states("See you at Nonna\u2019s", ["Nonna's"])


def test_a_decline_with_a_declining_phrase_is_kept() -> None:
    verdict = stance_kept("Unfortunately I can't make Thursday, but I look forward to Friday.", "decline")
    assert verdict is not None and verdict.verdict == "kept"
    assert "can't" in verdict.keeping


def test_a_decline_that_only_accepts_is_flipped() -> None:
    text = "I'm looking forward to the upcoming Friday meeting. Best regards, Sam"
    verdict = stance_kept(text, "decline")
    assert verdict is not None and verdict.verdict == "flipped"
    assert verdict.flipping == ("looking forward to",)


def test_a_phrase_inside_a_longer_one_of_the_other_side_does_not_count() -> None:
    # "can't" (declining) inside "can't wait" (accepting): the draft accepts.
    verdict = stance_kept("I can't wait to see you there!", "decline")
    assert verdict is not None and verdict.verdict == "flipped"
    accepted = stance_kept("I can't wait to see you there!", "accept")
    assert accepted is not None and accepted.verdict == "kept" and not accepted.flipping
    denied = stance_kept("That was not our fault.", "apologise")
    assert denied is not None and denied.verdict == "flipped"


def test_pleasantries_do_not_accept() -> None:
    verdict = stance_kept("I'm glad to hear that you're interested. I'm happy to help you plan it.", "accept")
    assert verdict is not None and verdict.verdict == "unclear"
    said_yes = stance_kept("Yes, Tuesday at 2pm works for me.", "accept")
    assert said_yes is not None and said_yes.verdict == "kept"


def test_a_stance_with_neither_phrase_is_unclear() -> None:
    verdict = stance_kept("Thanks for the update about the meeting.", "decline")
    assert verdict is not None and verdict.verdict == "unclear"


def test_a_case_adds_its_own_phrases() -> None:
    text = "We will be staying with our current supplier."
    plain = stance_kept(text, "decline")
    assert plain is not None and plain.verdict == "unclear"
    added = stance_kept(text, "decline", keeps=("will be staying",))
    assert added is not None and added.verdict == "kept"
    flipped = stance_kept("Thursday works for me.", "decline", flips=("thursday works",))
    assert flipped is not None and flipped.verdict == "flipped"


def test_no_stance_asked_has_no_verdict() -> None:
    assert stance_kept("anything", "none") is None


def test_apologies_kept() -> None:
    for text in ("We're so sorry about the kettle.", "Please accept our apologies.", "I apologize for the delay."):
        verdict = stance_kept(text, "apologise")
        assert verdict is not None and verdict.verdict == "kept", text


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("Best regards,\n[Your Name]", ["[Your Name]"]),
        ("Dear [Recipient's Name], hello <Recipient> and {name}", ["[Recipient's Name]", "<Recipient>", "{name}"]),
        ("See [the page](https://example.com) for details.", []),
        ("Best wishes,\nRuth", []),
    ],
)
def test_placeholders(text: str, found: list[str]) -> None:
    assert placeholders(text) == found


def test_framing_lines_come_from_the_drafters_layout() -> None:
    lines = framing_lines()
    laid_out = document_instruction("INSTRUCTION", "BEFORE", "AFTER").lower()
    assert lines and all(len(line.split()) >= 3 for line in lines)
    assert sum(line in laid_out for line in lines) == 2  # the headings before and after the document


def test_a_framing_heading_is_copied_back() -> None:
    before = "Dear customer,\n\n"
    heading = document_instruction("x", before, "").split("\n")[2]  # the heading, as the model saw it
    draft = f"{heading}\n\nDear customer, thank you for your order."
    copied = copied_back(draft, before, "", "write a thank-you")
    assert copied is not None and copied.startswith("framing:")


def test_a_long_run_of_the_document_or_instruction_is_copied_back() -> None:
    before = "Thanks for the note about the Hartley budget review on Thursday. I wanted to let you know that"
    draft = "Hi, thanks for the note about the Hartley budget review on Thursday and more."
    copied = copied_back(draft, before, "", "reply")
    assert copied == "before: thanks for the note about the hartley budget"
    instruction = "tell him Tuesday at 2pm works for me and I'll bring the draft roadmap."
    assert copied_back("Tuesday at 2pm works for me and I'll bring the draft roadmap.", "", "", instruction)
    after = "\n\nNo need to leave the building - carry on as normal unless the alarm keeps sounding."
    assert copied_back("on Wednesday. No need to leave the building, carry on as normal.", "", after, "")


def test_a_shorter_run_is_not_copied_back() -> None:
    before = "Thanks for the note about the Hartley budget review on Thursday."
    words = ["the", "Hartley", "budget", "review", "on", "Thursday", "is", "moved"]
    draft = " ".join(words[: COPIED_RUN - 1])
    assert copied_back(draft, before, "", "") is None
    assert copied_back("I can't make Thursday; Friday at 10am?", before, "", "I can't make Thursday") is None


def test_length_ratio() -> None:
    assert length_ratio(48, 96) == 0.5
    assert length_ratio(0, 0) == 0.0
