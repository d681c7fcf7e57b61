"""The faithfulness bench's cases (bench/data/faithful_cases.toml): frozen, of the size and shape issue #51
asks for, and loaded with their mistakes named."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from faithful_cases import FROZEN_SHA256, Case, load_cases, spread
from faithful_scores import facts_kept, stance_kept


def test_the_case_file_is_the_frozen_one() -> None:
    # A change to the cases is deliberate: update FROZEN_SHA256 with it, and say so beside the figures.
    assert load_cases().sha256 == FROZEN_SHA256


def test_the_set_has_the_size_and_spread_asked() -> None:
    case_set = load_cases()
    cases = case_set.cases
    held_out = [case for case in cases if case.held_out]
    assert len(cases) >= 64
    assert len(held_out) * 4 >= len(cases)
    assert sum(case.stance != "none" for case in held_out) >= 20
    assert {case.kind for case in held_out} == set(case_set.held_out_kinds)
    assert not {case.kind for case in cases if not case.held_out} & set(case_set.held_out_kinds)
    assert set(Counter(case.stance for case in cases)) == {"decline", "accept", "apologise", "none"}
    assert Counter(case.cursor for case in cases)["middle"] >= 16  # text after the cursor
    lines = [len(case.before.splitlines()) for case in cases]
    assert min(lines) >= 1 and max(lines) <= 8 and len(set(lines)) >= 4
    assert all(case.instruction.strip() and case.facts for case in cases)


def test_the_priya_letter_is_a_case() -> None:
    priya = next(case for case in load_cases().cases if case.id == "priya-hartley")
    assert not priya.held_out and priya.stance == "decline" and priya.after == ""
    assert priya.before.endswith("I wanted to let you know that")
    good = "I can't make Thursday. Could we meet on Friday at 10am instead? Could you send the latest figures?"
    assert facts_kept(good, priya.facts) == [True, True, True]
    verdict = stance_kept("See you Thursday, looking forward to it.", priya.stance, priya.keeps, priya.flips)
    assert verdict is not None and verdict.verdict == "flipped"


def test_no_fact_is_given_away_by_the_document() -> None:
    # A fact the document already states would count as kept by a draft that copies the document.
    for case in load_cases().cases:
        given = facts_kept(case.before + "\n" + case.after, case.facts)
        assert given.count(True) <= len(case.facts) // 2, case.id


def test_spread_takes_every_group_in_proportion() -> None:
    cases = load_cases().cases
    groups = {(case.held_out, case.stance) for case in cases}
    chosen = spread(cases, len(groups))
    assert {(case.held_out, case.stance) for case in chosen} == groups
    assert chosen[0].id == "priya-hartley"
    assert [case.id for case in spread(cases, len(cases) + 5)] == [case.id for case in cases]
    twice = spread(cases, 2 * len(groups))
    assert len(twice) == 2 * len(groups) and set(chosen) <= set(twice)


def _write(tmp_path: Path, case: str) -> Path:
    path = tmp_path / "cases.toml"
    path.write_text(f'held_out_kinds = ["school-message"]\n\n[[case]]\n{case}', encoding="utf-8")
    return path


GOOD = """id = "a"
kind = "reminder"
held_out = false
before = "Hi,"
after = ""
instruction = "remind them"
tokens = 32
facts = [["Friday"]]
stance = "none"
names = []
"""


def test_a_well_formed_file_loads(tmp_path: Path) -> None:
    loaded = load_cases(_write(tmp_path, GOOD))
    assert loaded.cases == (Case("a", "reminder", False, "Hi,", "", "remind them", 32, (("Friday",),), "none", ()),)
    assert len(loaded.sha256) == 64


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (('stance = "none"', 'stance = "maybe"'), "stance must be one of"),
        (("held_out = false", "held_out = true"), "held_out must be true exactly"),
        (('kind = "reminder"', 'kind = "school-message"'), "held_out must be true exactly"),
        (('facts = [["Friday"]]', "facts = [[]]"), "a fact: expected a list of non-empty strings"),
        (("tokens = 32", 'tokens = "32"'), "tokens should be of type int"),
        (("names = []", "names = []\nextra = 1"), "unknown keys ['extra']"),
        (("names = []", 'names = []\nkeeps = ["x"]'), "keeps and flips belong to a stance"),
    ],
)
def test_a_malformed_case_is_named(tmp_path: Path, change: tuple[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=r"case 'a'") as raised:
        load_cases(_write(tmp_path, GOOD.replace(*change)))
    assert message in str(raised.value)
