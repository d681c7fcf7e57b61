"""The facts an instruction asks a draft to carry, and whether a text carries each (app/domain/asked_facts.py)."""

from __future__ import annotations

import pytest

from app.domain.asked_facts import AskedFact, asked_facts, missing_facts
from app.domain.asked_stance import acceptances, asked_stances, asks_to_decline, takes, turns_decline_around
from app.domain.draft_check import CheckedDraft, DraftChecks


def facts(instruction: str) -> list[tuple[str, str]]:
    return [(fact.kind, fact.said) for fact in asked_facts(instruction)]


def test_each_kind_of_fact_is_found_once_in_the_order_it_is_said() -> None:
    assert facts(
        "Tell Marguerite Osei the invoice of €3,480.50 for job QX-2291 is due on 17 June; pay to "
        "IBAN DE44 5001 0517 5407 3249 31 by 4:30pm Thursday, or write to accounts@birchfield.example.org. "
        "That is 7% more than in May; see birchfield.example.org/pay for 2 other ways."
    ) == [
        ("name", "Marguerite Osei"),
        ("money", "€3,480.50"),
        ("code", "QX-2291"),
        ("date", "17 June"),
        ("code", "DE44 5001 0517 5407 3249 31"),
        ("time", "4:30pm"),
        ("weekday", "Thursday"),
        ("email", "accounts@birchfield.example.org"),
        ("percent", "7%"),
        ("month", "May"),
        ("url", "birchfield.example.org/pay"),
        ("number", "2"),
    ]


def test_words_that_are_not_names_are_left_out() -> None:
    # Sentence openings, greetings, pronouns, weekdays and months are not names a draft must carry.
    assert facts("Thank them. Say I'm sorry and that Dear old Ravi can't come on Monday in August.") == [
        ("name", "Ravi"),
        ("weekday", "Monday"),
        ("month", "August"),
    ]
    assert facts("write a short thank-you note") == []
    assert facts("Reply politely; you may say we march on.") == [], "'may' and 'march' are verbs here"


def test_a_possessive_ends_a_name() -> None:
    assert facts("decline Olu's invite to the Harbour Lights dinner") == [("name", "Olu"), ("name", "Harbour Lights")]


@pytest.mark.parametrize(
    ("asked", "carried", "not_carried"),
    [
        ("meet at 10am", ["at 10 a.m.", "10:00 am", "10.00am", "at 10:00", "10AM sharp"], ["at 10 pm", "at 11am"]),
        ("call at 3 p.m.", ["15:00", "3pm", "3:00 PM"], ["3am", "at 3"]),
        ("from 10:30", ["10.30am", "10:30", "22:30"], ["10:03", "11:30"]),
        ("at noon", ["at 12pm", "midday", "12:00"], ["midnight"]),
        ("see you Friday", ["on friday", "FRIDAY", "Fri.", "every Friday's"], ["fry day", "fri"]),
        ("on 3 March", ["March 3rd", "3rd of March", "Mar 3", "the 3 March"], ["13 March", "3 May", "in March"]),
        ("by 05/11/2026", ["on 5/11", "05.11.2026", "2026-11-05"], ["05/12/2026"]),
        ("in September", ["Sept. 4", "in Sep", "4 September"], ["in december"]),
        ("the £1,250 rent", ["£1250", "1,250 pounds", "£1,250.00", "GBP 1250"], ["£125", "£12,500"]),
        ("a €2.5k deposit", ["2,500 euros", "€2500"], ["€25"]),
        ("a 15% discount", ["15 %", "15 percent off", "15 per cent"], ["15 days", "1.5%"]),
        ("code WINTER25", ["winter25", "Winter-25", "WINTER 25"], ["WINTER2025", "code WINTER"]),
        ("IBAN NL91 ABNA 0417 1643 00", ["NL91ABNA0417164300", "nl91 abna 0417 1643 00"], ["NL91 ABNA 0417"]),
        ("write to ana@pinewood.example.com", ["ANA@Pinewood.example.com."], ["ana@pinewood.example"]),
        ("see https://pinewood.example.com/book/", ["pinewood.example.com/book"], ["pinewood.example.com"]),
        ("ask Ana Lima", ["ana lima", "Ana Lima's"], ["Ana", "Analima"]),
        ("ship it tomorrow, invoice next week", ["Tomorrow, and next week"], ["tomorrow", "next month"]),
        ("order #4521 for 3 boxes", ["4521, three boxes", "no. 4,521 and 3 boxes"], ["452 and 3", "4521 and 13"]),
        ("the 2nd floor", ["second floor", "floor 2"], ["22nd"]),
    ],
)
def test_a_fact_is_carried_in_any_of_its_usual_spellings(
    asked: str, carried: list[str], not_carried: list[str]
) -> None:
    found = asked_facts(asked)
    assert found, f"nothing found in {asked!r}"
    for text in carried:
        assert missing_facts(text, found) == (), f"{asked!r} should be carried by {text!r}"
    for text in not_carried:
        assert missing_facts(text, found), f"{asked!r} should not be carried by {text!r}"


def test_missing_facts_keeps_the_facts_a_text_leaves_out() -> None:
    found = asked_facts("say Thursday is out, propose Friday at 10am, and ask Ines for the Q3 figures")
    missing = missing_facts("Could we meet on Friday instead? Ines, please send the Q3 figures.", found)
    assert missing == (AskedFact("weekday", "Thursday"), AskedFact("time", "10am"))


def test_a_decline_is_asked_in_many_words() -> None:
    for instruction in (
        "decline the invitation",
        "tell her I can't make Thursday",
        "say no to the offer",
        "turn the job down",
        "I'm unable to attend",
        "explain I'm not able to come",
        "I cannot make it",
    ):
        assert asks_to_decline(instruction), instruction
    for instruction in ("accept the invitation", "thank them for the flowers", "say yes and bring a cake"):
        assert not asks_to_decline(instruction), instruction


def test_an_acceptance_turns_a_decline_around_unless_the_draft_also_declines() -> None:
    asked = "Write a short note to Sam declining Friday's meeting."
    assert turns_decline_around(asked, "I'm looking forward to the upcoming Friday meeting.")
    assert turns_decline_around(asked, "Happy to attend! I\u2019ll be there on Friday.")
    assert not turns_decline_around(asked, "Sadly I can't make Friday, though I was looking forward to it.")
    assert not turns_decline_around(asked, "I'm not looking forward to explaining this, but I won't make it.")
    assert not turns_decline_around(asked, "Thanks for the invitation to Friday's meeting.")
    assert not turns_decline_around("accept the meeting", "I'm looking forward to it.")
    assert acceptances("I'm not looking forward to it, but count me in") == ("count me in",)
    assert acceptances("I don't look forward to it") == ()


def test_the_stance_asked_is_taken_or_not() -> None:
    assert asked_stances("apologise for the late delivery and say we can't refund the postage") == {
        "decline",
        "apologise",
    }
    assert asked_stances("say yes, Tuesday works for me") == {"accept"}
    assert asked_stances("accept the dinner but say I can't bring wine") == set(), "both: neither is asked"
    assert asked_stances("tell them we don't accept the revised quote") == {"decline"}
    assert takes("decline", "Unfortunately I won't be able to come.") and not takes("decline", "I can't wait!")
    assert takes("accept", "Yes, Tuesday sounds good.") and not takes("accept", "Yes, but I can't make Tuesday.")
    assert takes("apologise", "We're so sorry about the mix-up.") and not takes("apologise", "Thanks for waiting.")
    checks = DraftChecks.of("say sorry that I can't come to the quiz")
    verdict = checks.verdict("Thanks for inviting me, I can't come to the quiz.")
    assert verdict.stances_missing == ("apologise",) and not verdict.passed
    assert checks.verdict("I'm sorry, I can't come to the quiz this time.").passed
    report = CheckedDraft(2, 1, checks.facts, (), False, False, verdict.stances_missing)
    assert report.note() == "drafted 2 times, kept try 1; it does not apologise as asked"


def test_a_draft_is_checked_and_reported() -> None:
    checks = DraftChecks.of("decline Friday's dinner with Leo, suggest Sunday at 7pm")
    assert checks.checks_anything and checks.stances == {"decline"}
    good = checks.verdict("I'm afraid I can't do dinner on Friday, Leo. Would Sunday at 7pm work?")
    assert good.passed
    turned = checks.verdict("Friday with Leo sounds great, I'll be there at 7pm, or Sunday.")
    short = checks.verdict("I can't come on Friday.")
    assert turned.turned_around and not turned.missing
    # The stance counts first: a decline that leaves facts out beats an acceptance that carries them all.
    assert short.rank > turned.rank > checks.verdict("Count me in!").rank
    assert good.rank > short.rank > checks.verdict("I can't.").rank
    assert not DraftChecks.of("write something cheerful").checks_anything

    report = CheckedDraft(3, 2, checks.facts, short.missing, short.turned_around)
    assert report.note() == 'drafted 3 times, kept try 2; still missing "Leo", "Sunday", "7pm"'
    assert report.as_json() == {
        "tries": 3,
        "kept_try": 2,
        "facts_asked": ["Friday", "Leo", "Sunday", "7pm"],
        "facts_missing": ["Leo", "Sunday", "7pm"],
        "topics_asked": [],
        "topics_missing": [],
        "stances_missing": [],
        "declines_turned_around": False,
        "copies_back": False,
        "writes_next_turn": False,
        "placeholders": [],
    }
    assert CheckedDraft(1, 1, checks.facts, (), False).note() == ""
    assert (
        CheckedDraft(2, 2, checks.facts, (), False).note()
        == "drafted 2 times, kept try 2; it carries the 4 facts asked"
    )


def test_a_draft_that_copies_the_instruction_or_the_document_back_comes_last() -> None:
    asked = "tell them the boiler engineer comes on Tuesday between 8 and 10am"
    checks = DraftChecks.of(asked, "Dear tenants,\nThe lift in block B will be out of service all week.")
    echo = checks.verdict("Tell them the boiler engineer comes on Tuesday between 8 and 10am.")
    assert echo.echoes and not echo.missing and not echo.passed
    assert checks.verdict("The lift in block B will be out of service all week, sorry.").echoes
    own = checks.verdict("The boiler engineer will visit on Tuesday, some time between 8 and 10am.")
    assert own.passed and not own.echoes
    assert checks.verdict("An engineer will visit next week.").rank > echo.rank
    report = CheckedDraft(2, 1, checks.facts, (), False, echo.echoes)
    assert report.note() == "drafted 2 times, kept try 1; it copies words of the request or the document back"


def test_the_words_asked_for_recited_as_a_bare_list_are_copied_back_unless_the_instruction_lists_them() -> None:
    asked = "tell Emma the new latch for the left side gate is fitted free of charge on Thursday morning"
    checks = DraftChecks.of(asked, "Dear Emma,\n\n")
    said = "Emma, your new latch on the left side gate goes in on Thursday morning, fitted free of charge."
    assert checks.verdict(said).passed
    recited = f'{said} Please quote: "Left, side, gate, open, fit, free, charge, morning."'
    verdict = checks.verdict(recited)
    assert verdict.echoes and not verdict.passed and verdict.rank < checks.verdict(said).rank
    # Three of the words in a list are a sentence's list; words of no request are no recital.
    assert not checks.verdict(f"{said} Bring keys, gloves, tape, oil, rope and a torch.").echoes
    assert not checks.verdict(f"{said} The gate, latch, charge.").echoes
    # Where the instruction lists the things, the draft may too.
    kit = DraftChecks.of("remind the class to bring towels, goggles, caps, locks on Friday", "Dear parents,\n\n")
    assert not kit.verdict("On Friday, please send your child with towels, goggles, caps, locks.").echoes


def test_a_draft_that_goes_on_into_the_next_turn_of_the_chat_fails() -> None:
    checks = DraftChecks.of("thank Ana for Friday")
    assert checks.verdict("Thanks for Friday, Ana!\nBest,\nLeo\nuser\nHow many birds are there?").new_turn
    assert checks.verdict("Thanks for Friday, Ana! assistant").new_turn
    kept = checks.verdict("Thanks for Friday, Ana. My assistant\nwill call you.")
    assert not kept.new_turn and kept.passed
    assert not checks.verdict("Thanks, Ana, for Friday.\nDr Reyes's Assistant").new_turn
