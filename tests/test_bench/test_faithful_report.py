"""The faithfulness bench's report (bench/faithful_drafts.py): drafts scored and pooled per group."""

from __future__ import annotations

from dataclasses import replace

from faithful_cases import load_cases
from faithful_drafts import report, scored


def test_drafts_are_scored_and_pooled_per_group() -> None:
    cases = {case.id: case for case in load_cases().cases}
    priya, dog = cases["priya-hartley"], cases["larch-court-dog"]
    assert not priya.held_out and dog.held_out
    good = scored(
        priya, "ar", "ar", "I can't make Thursday; could we do Friday at 10am? Send the figures.", 24, 0.5, ""
    )
    echo = scored(
        dog,
        "ar",
        "ar",
        "The document after your text:\n\nBest regards,\n[Your Name]",
        12,
        0.3,
        "",
    )
    unnamed = scored(replace(dog, names=()), "ar", "ar", "Best regards,\n[Your Name]", 12, 0.3, "")
    assert good.stance is not None and good.stance.verdict == "kept" and good.copied is None
    assert echo.copied == "framing: the document after your text" and echo.placeholder_defect
    assert unnamed.placeholders == ("[Your Name]",) and not unnamed.placeholder_defect

    rows = report([good, echo], ["ar", "diffusion"])
    assert list(rows) == ["all", "held out", "not held out"]
    assert list(rows["all"]) == ["ar"]  # a label without drafts has no row
    everything = rows["all"]["ar"]
    assert everything["facts"] == f"3 of {len(priya.facts) + len(dog.facts)}"
    assert (everything["stances_kept"], everything["stances"]) == (1, 2)
    assert (everything["placeholders"], everything["copied_back"]) == (1, 1)
    assert rows["held out"]["ar"]["facts_kept"] == 0.0
    assert rows["not held out"]["ar"]["facts_kept"] == 1.0
    assert everything["length_ratio"] == (24 / priya.tokens + 12 / dog.tokens) / 2
