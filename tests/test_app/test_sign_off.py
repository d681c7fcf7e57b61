"""A draft's body and its sign-off, so that a draft can be carried on from the end of what it says."""

from __future__ import annotations

import pytest

from app.domain.sign_off import split_sign_off


@pytest.mark.parametrize(
    ("text", "body", "sign_off"),
    [
        ("I can't come on Thursday.\n\nBest regards,\nAna\n", "I can't come on Thursday.", "\n\nBest regards,\nAna"),
        ("I can't come.\nThanks,\nAna", "I can't come.", "\nThanks,\nAna"),
        (
            "Fine.\n\nKind regards,\nAna Silva\nHead of Sales, Hartley Ltd",
            "Fine.",
            "\n\nKind regards,\nAna Silva\nHead of Sales, Hartley Ltd",
        ),
        ("See you on Friday.\n\nCheers, Tom", "See you on Friday.", "\n\nCheers, Tom"),
    ],
)
def test_a_closing_line_and_the_short_lines_after_it_are_the_sign_off(text: str, body: str, sign_off: str) -> None:
    assert split_sign_off(text) == (body, sign_off)
    assert body + sign_off == text.rstrip()


@pytest.mark.parametrize(
    "text",
    [
        "Thanks for the note. I will be there on Friday at 10am.",
        "Thank you for your help with the move, it meant a lot to all of us here and to the neighbours too.",
        "I can come.\n\nThanks for asking, could you send the agenda?",
        "Best regards,\nAna\n\nPS: the venue has changed to the Leeds office, so please tell everyone in the team.",
    ],
)
def test_a_sentence_that_starts_like_a_closing_is_body(text: str) -> None:
    assert split_sign_off(text) == (text.rstrip(), "")
