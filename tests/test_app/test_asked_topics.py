"""The content words of an instruction (app/domain/asked_topics.py), and the draft check that asks a draft to
mention most of them."""

from __future__ import annotations

from app.domain.asked_facts import asked_facts
from app.domain.asked_topics import AskedTopic, asked_topics, stem
from app.domain.draft_check import CheckedDraft, DraftChecks


def said(instruction: str) -> list[str]:
    return [topic.said for topic in asked_topics(instruction, asked_facts(instruction))]


def test_the_content_words_are_what_the_draft_is_about_not_how_to_write_it() -> None:
    assert said("say no, the building's lease doesn't allow dogs, but cats are fine if she pays a £200 deposit.") == [
        "building",
        "lease",
        "allow",
        "dogs",
        "cats",
        "pays",
        "deposit",
    ]
    assert said("Write a short, polite email to tell them thanks") == []
    assert said("write something cheerful") == []
    # Facts the patterns read (names, days, times, sums) are not asked twice.
    assert said("tell Wilhelmina the parcel comes on Wednesday at 4:15pm") == ["parcel"]


def test_a_word_is_mentioned_in_any_of_its_inflections_and_only_as_a_whole_word() -> None:
    assert stem("moving") == stem("move") == stem("moves")
    assert stem("nesting") == stem("nests") == stem("nested")
    assert stem("parties") == stem("party")
    assert AskedTopic("cats").carried_by("Cats are welcome.")
    assert AskedTopic("blackbirds").carried_by("a blackbird is nesting there")
    assert not AskedTopic("lease").carried_by("Please release the keys.")
    assert not AskedTopic("cat").carried_by("We can't locate it.")


def test_a_draft_passes_when_it_mentions_every_content_word() -> None:
    asked = "say no, the lease doesn't allow dogs, but cats are fine if she pays a £200 deposit"
    assert DraftChecks.of(asked).topics == (), "an open prompt's content words are not checked"
    checks = DraftChecks.of(asked, "Dear Ms Reed,\n\nThank you for asking about the flat.")
    assert [topic.said for topic in checks.topics] == ["lease", "allow", "dogs", "cats", "pays", "deposit"]
    every = checks.verdict("Unfortunately the lease won't allow a dog. Cats are welcome if she pays a £200 deposit.")
    assert every.passed and every.topics_missing == ()
    most = checks.verdict("Unfortunately the lease won't allow a dog. Cats are welcome; the deposit is £200.")
    assert not most.passed and [t.said for t in most.topics_missing] == ["pays"]
    assert not most.mentions_enough, "one left out is one too many"
    few = checks.verdict("Unfortunately dogs are not allowed. The deposit is £200.")
    assert not few.passed and not few.missing and few.stances_missing == ()
    # More content words mentioned ranks higher, as a fact more carried does.
    assert every.rank > most.rank > few.rank
    assert checks.verdict("Unfortunately no. The deposit is £200.").rank < few.rank


def test_the_report_names_the_content_words_left_out() -> None:
    checks = DraftChecks.of("apologise that the side gate was left open on Tuesday", "Dear Mr Hale,\n\n")
    left_open = checks.verdict("Sorry we left it open on Tuesday.")
    report = CheckedDraft(
        4, 2, checks.facts, left_open.missing, False, topics=checks.topics, topics_missing=left_open.topics_missing
    )
    assert report.note() == 'drafted 4 times, kept try 2; it does not mention "side", "gate"'
    assert report.as_json()["topics_asked"] == ["side", "gate", "left", "open"]
    assert report.as_json()["topics_missing"] == ["side", "gate"]
    kept = checks.verdict("Sorry, we left the side gate open on Tuesday.")
    assert kept.passed
    fine = CheckedDraft(2, 2, checks.facts, (), False, topics=checks.topics, topics_missing=kept.topics_missing)
    assert fine.note() == "drafted 2 times, kept try 2; it carries the 1 facts asked"


def test_a_draft_that_leaves_a_placeholder_to_fill_in_ranks_with_copies() -> None:
    checks = DraftChecks.of("say yes to Saturday", "Dear Ana,\n\nThanks for the invitation.\n\n")
    placeholder = checks.verdict("Yes, Saturday suits me. Best, [Your Name]")
    assert placeholder.placeholders == ("[Your Name]",) and not placeholder.passed
    assert checks.verdict("Yes, Saturday works.").rank > placeholder.rank
    assert checks.verdict("Yes, Saturday suits me. See [the map](https://example.org).").passed
    # One the document has itself may stay.
    kept = DraftChecks.of("say yes to Saturday", "Dear [Name],\n\n").verdict("Yes, Saturday works, [Name].")
    assert kept.placeholders == () and kept.passed
    report = CheckedDraft(2, 1, checks.facts, (), False, placeholders=placeholder.placeholders)
    assert report.note() == "drafted 2 times, kept try 1; it leaves [Your Name] to fill in"
    assert report.as_json()["placeholders"] == ["[Your Name]"]
