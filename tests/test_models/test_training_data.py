"""Training data for the embedded diffusion model: varied instructions, resumable generation."""

from __future__ import annotations

import json
from pathlib import Path

from app.tools.training_data import answered_ids, instruction_set, make_pairs, quoted_texts
from engines.llama_ar import LlamaAREngine
from models.training.data import clean_draft, load_pairs, to_last_sentence, without_loops
from models.training.open_prompts import HELD_OUT_KINDS, TRAIN_KINDS, held_out_value, open_instructions
from models.training.prompts import instructions


def test_instructions_vary_and_repeat_per_seed() -> None:
    made = instructions(300, seed=1)
    assert len({i.text for i in made}) == 300
    assert len({i.topic for i in made}) > 30 and len({i.recipient for i in made}) > 10
    assert [i.text for i in instructions(20, seed=1)] == [i.text for i in made[:20]]
    assert instructions(5, seed=2)[0].text != made[0].text
    assert made[0].text.startswith("Write ") and made[0].text.endswith(".")


QUOTED = [f"Dear Sam,\n\nThe meeting moves to day {n}. Thanks,\nAlex" for n in range(40)]


def test_open_instructions_keep_held_out_kinds_and_subjects_out_of_training() -> None:
    train = open_instructions(400, quoted=QUOTED, seed=0)
    unseen = open_instructions(60, quoted=QUOTED, seed=0, held_out=True)
    assert len({i.text for i in train}) == 400 and len(unseen) == 60
    assert {i.kind for i in train} == set(TRAIN_KINDS) and {i.kind for i in unseen} == set(HELD_OUT_KINDS)
    assert not set(TRAIN_KINDS) & set(HELD_OUT_KINDS)
    train_values = {value for i in train for _, value in i.slots}
    unseen_values = {value for i in unseen for _, value in i.slots}
    assert train_values and unseen_values and not train_values & unseen_values
    assert all(not held_out_value(v) for v in train_values) and all(held_out_value(v) for v in unseen_values)
    assert not {i.text for i in train} & {i.text for i in unseen}
    assert [i.text for i in open_instructions(20, quoted=QUOTED, seed=0)] == [i.text for i in train[:20]]
    quoting = next(i for i in train if i.kind == "reply")
    assert "Dear Sam" in quoting.text and "sam" not in quoting.topic_words
    travel = next(i for i in unseen if i.kind == "travel")
    place = dict(travel.slots)["place"]
    assert place in travel.text and set(travel.topic_words) <= {w.lower() for w in place.replace(",", "").split()}


def test_the_open_set_quotes_finished_drafts_only(tmp_path: Path) -> None:
    path = tmp_path / "drafts.jsonl"
    records = [
        {"id": 1, "text": "Write a note.", "draft": "A finished note.", "finish_reason": "eos"},
        {"id": 2, "text": "Write a note.", "draft": "Cut off in the mid", "finish_reason": "length"},
        {"id": 3, "text": "Write a note.", "draft": "x" * 2000, "finish_reason": "eos"},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    assert quoted_texts(path) == ["A finished note."]
    assert [i.text for i in instruction_set("templated", 3, 0, path)] == [i.text for i in instructions(3)]
    assert len(instruction_set("open", 30, 0, path)) == 30


def test_generation_writes_pairs_and_resumes(ar_engine: LlamaAREngine, tmp_path: Path) -> None:
    out = tmp_path / "drafts.jsonl"
    assert make_pairs(ar_engine, out, instructions(2), max_tokens=8) == 2  # greedy, decoded together
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(r["id"] for r in records) == [0, 1]
    assert all(r["draft"] and r["text"].startswith("Write ") and r["model"] == "smollm2-135m-instruct" for r in records)
    assert all(r["temperature"] == 0 and r["finish_reason"] == "length" and r["draft_tokens"] == 8 for r in records)
    with out.open("a") as handle:
        handle.write('{"id": 2, "draft": "cut of')  # a run killed mid-line
    assert answered_ids(out) == {0, 1}
    assert make_pairs(ar_engine, out, instructions(3), max_tokens=8) == 1
    assert sorted(json.loads(line)["id"] for line in out.read_text().splitlines()) == [0, 1, 2]


def test_sampled_generation_records_its_temperature(ar_engine: LlamaAREngine, tmp_path: Path) -> None:
    out = tmp_path / "drafts.jsonl"
    assert make_pairs(ar_engine, out, instructions(1), max_tokens=6, temperature=0.8) == 1
    record = json.loads(out.read_text())
    assert record["temperature"] == 0.8 and record["draft"] and 1 <= record["draft_tokens"] <= 6


LOOPING = (
    "Dear team,\n\nThe picnic was a great way to celebrate the end of the year. We had a lot of fun. "
    "The picnic was a great way to celebrate the end of the year. The picnic was"
)


def test_a_greedy_loop_is_cut_before_its_first_repeat() -> None:
    assert without_loops(LOOPING) == (
        "Dear team,\n\nThe picnic was a great way to celebrate the end of the year. We had a lot of fun."
    )
    # Short repeated lines (greetings, sign-offs) are not loops.
    assert without_loops("Thanks!\nBest,\nSam\nThanks!\nBest,\nSam") == "Thanks!\nBest,\nSam\nThanks!\nBest,\nSam"


def test_a_draft_cut_by_the_token_limit_ends_at_its_last_sentence_or_line() -> None:
    assert to_last_sentence("We met on Monday. The results were good, and we") == "We met on Monday."
    assert to_last_sentence('He said "yes." Then we') == 'He said "yes."'
    assert to_last_sentence("Best regards,\n[Your Name]\n[Your Addr") == "Best regards,\n[Your Name]"
    assert to_last_sentence("no end at all") == "no end at all"
    assert clean_draft("Finished without a full stop", finished=True) == "Finished without a full stop"
    assert clean_draft("One. Two and", finished=False) == "One."
    assert clean_draft(LOOPING, finished=False).endswith("We had a lot of fun.")


def test_pairs_are_loaded_cleaned_and_empty_drafts_dropped(tmp_path: Path) -> None:
    path = tmp_path / "drafts.jsonl"
    records = [
        {"id": 1, "text": "Write a note.", "draft": "One. Two and", "finish_reason": "length"},
        {"id": 2, "text": "Write a note.", "draft": "Done", "finish_reason": "eos"},
        {"id": 3, "text": "Write a note.", "draft": "", "finish_reason": "eos"},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    assert [(p.id, p.draft) for p in load_pairs(path)] == [(1, "One."), (2, "Done")]
