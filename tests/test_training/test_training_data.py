"""Training data for the embedded diffusion model: varied instructions, resumable generation."""

from __future__ import annotations

import json
from pathlib import Path

from app.domain.context import document_instruction, rewrite_instruction
from engines.llama_ar import LlamaAREngine
from training.batched import greedy_batch
from training.data import (
    Pair,
    clean_draft,
    distinct_instructions,
    faithful_rewrite,
    load_pairs,
    new_text,
    to_last_sentence,
    without_loops,
)
from training.document_prompts import (
    DOCUMENT_FIRST_ID,
    REWRITE_FIRST_ID,
    cut_points,
    document_instructions,
    paragraphs_of,
    rewrite_instructions,
)
from training.open_prompts import (
    FORM_KINDS,
    HELD_OUT_KINDS,
    TRAIN_KINDS,
    OpenInstruction,
    held_out_value,
    open_instructions,
)
from training.prompts import instructions
from training.teacher import answered_ids, instruction_set, make_pairs, quoted_texts


def test_instructions_vary_and_repeat_per_seed() -> None:
    made = instructions(300, seed=1)
    assert len({i.text for i in made}) == 300
    assert len({i.topic for i in made}) > 30 and len({i.recipient for i in made}) > 10
    assert [i.text for i in instructions(20, seed=1)] == [i.text for i in made[:20]]
    assert instructions(5, seed=2)[0].text != made[0].text
    assert made[0].text.startswith("Write ") and made[0].text.endswith(".")


DATA = Path(__file__).resolve().parents[2] / "training" / "data"
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


def texts_by_id(path: Path) -> dict[int, str]:
    """The instructions a teacher's file answered, by id."""
    return {record["id"]: record["text"] for record in map(json.loads, path.read_text().splitlines())}


def test_the_forms_set_adds_kinds_of_its_own_with_training_subjects_only() -> None:
    forms = instruction_set("forms", 300, 0, [])
    assert len({i.text for i in forms}) == 300
    kinds = {i.kind for i in forms if isinstance(i, OpenInstruction)}
    assert kinds == set(FORM_KINDS) and not kinds & (set(TRAIN_KINDS) | set(HELD_OUT_KINDS))
    held_out_templates = {t.split("{")[0] for t in HELD_OUT_KINDS.values()}
    assert not any(i.text.startswith(t) for i in forms for t in held_out_templates)
    values = {value for i in forms if isinstance(i, OpenInstruction) for _, value in i.slots}
    assert values and not any(held_out_value(v) for v in values)
    open_ids = {i.id for i in instruction_set("open", 300, 0, [])} | {i.id for i in instruction_set("open", 300, 1, [])}
    assert not {i.id for i in forms} & open_ids
    assert not {i.id for i in forms} & {i.id for i in instruction_set("forms", 300, 1, [])}
    # The forms file is the one training/README.md's two commands write (--count 1200, then 2400).
    forms_written = texts_by_id(DATA / "drafts-forms.jsonl")
    first, resumed = instruction_set("forms", 1200, 0, []), instruction_set("forms", 2400, 0, [])
    assert [forms_written[i.id] for i in first] + [forms_written[i.id] for i in resumed[1200:]] == [
        i.text for i in first + resumed[1200:]
    ]
    # The open set's lists are still the ones its files were written from.
    written = texts_by_id(DATA / "drafts-open-seed1.jsonl")
    again = instruction_set("open", 40, 1, [DATA / "drafts.jsonl"])  # as training/README.md wrote them
    assert [written.get(i.id) for i in again] == [i.text for i in again]


def test_the_open_set_quotes_finished_drafts_only(tmp_path: Path) -> None:
    path = tmp_path / "drafts.jsonl"
    records = [
        {"id": 1, "text": "Write a note.", "draft": "A finished note.", "finish_reason": "eos"},
        {"id": 2, "text": "Write a note.", "draft": "Cut off in the mid", "finish_reason": "length"},
        {"id": 3, "text": "Write a note.", "draft": "x" * 2000, "finish_reason": "eos"},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    assert quoted_texts([path]) == ["A finished note."]
    assert [i.text for i in instruction_set("templated", 3, 0, [path])] == [i.text for i in instructions(3)]
    assert len(instruction_set("open", 30, 0, [path])) == 30


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


def test_sets_written_with_other_seeds_have_ids_of_their_own_and_repeated_instructions_are_learned_once(
    tmp_path: Path,
) -> None:
    path = tmp_path / "drafts.jsonl"
    path.write_text(
        "".join(
            json.dumps(r) + "\n"
            for r in ({"id": 1, "text": "Write.", "draft": d, "finish_reason": "eos"} for d in DOCUMENTS)
        )
    )
    ids = {
        (name, seed): {i.id for i in instruction_set(name, 20, seed, [path])}
        for name in ("open", "document", "rewrite")
        for seed in (0, 1)
    }
    assert all(len(found) == 20 for found in ids.values())
    sets = list(ids.values())
    assert all(not a & b for i, a in enumerate(sets) for b in sets[i + 1 :])
    assert min(ids["open", 0]) == 100_000  # the first open set's ids, as written
    pairs = [Pair(1, "Write a note.", "First."), Pair(2, "Write a poem.", "Roses."), Pair(3, "Write a note.", "Again.")]
    assert [p.id for p in distinct_instructions(pairs)] == [1, 2]


DOCUMENTS = [
    f"Dear {name},\n\nThe plan for day {n} is set, and the whole team agreed to it. We meet at the hall at nine. "
    "Bring the forms.\n\nThanks for your help with the move. It went well.\n\nBest,\nAlex"
    for n in range(30)
    for name in ("Sam", "Kim", "Lee")
]


def test_drafts_into_documents_are_laid_out_as_ctrl_d_sends_them() -> None:
    made = document_instructions(60, DOCUMENTS, seed=0)
    assert len(made) == 60 and len({i.text for i in made}) == 60
    assert [i.id for i in made] == list(range(DOCUMENT_FIRST_ID, DOCUMENT_FIRST_ID + 60))
    for instruction in made:
        slots = dict(instruction.slots)
        assert instruction.text == document_instruction(slots["ask"], slots["before"], slots["after"])
        sources = [d for d in DOCUMENTS if d.startswith(slots["before"]) and d.endswith(slots["after"])]
        assert any(slots["before"] in [d[:cut].rstrip() for cut in cut_points(d)] for d in sources)
        assert any(not held_out_value(d) for d in sources)
    # A document held out whose text is its own (day 0 to 29, three names) never opens an instruction.
    unique_held_out = [d for d in DOCUMENTS if held_out_value(d)]
    assert unique_held_out
    assert not {d.split(".")[0] for d in unique_held_out} & {dict(i.slots)["before"].split(".")[0] for i in made}
    assert any(dict(i.slots)["after"] for i in made) and any(not dict(i.slots)["after"] for i in made)
    # The asks name training subjects only.
    named = {value for i in made for name, value in i.slots if name not in ("ask", "before", "after")}
    assert named and not any(held_out_value(value) for value in named)
    assert [i.text for i in document_instructions(10, DOCUMENTS, seed=0)] == [i.text for i in made[:10]]


def test_the_teacher_is_asked_for_a_draft_into_a_document_in_its_own_layout(
    ar_engine: LlamaAREngine, tmp_path: Path
) -> None:
    """The pair learns the service's layout; the teacher reads the text, then the ask (it echoes the
    service's headings), and the record says what it was asked."""
    made = document_instructions(2, DOCUMENTS, seed=0)
    for instruction in made:
        slots = dict(instruction.slots)
        assert instruction.teacher_message.startswith(slots["before"]) and slots["ask"] in instruction.teacher_message
        assert "The document, up to where your text goes" not in instruction.teacher_message
    out = tmp_path / "drafts.jsonl"
    assert make_pairs(ar_engine, out, made[:1], max_tokens=8) == 1
    record = json.loads(out.read_text())
    assert record["text"] == made[0].text and record["teacher_message"] == made[0].teacher_message
    prompt = ar_engine.chat_prompt(made[0].teacher_message, 8)
    asked = next(greedy_batch(ar_engine, [prompt], 8, parallel=1))
    assert record["draft"] == ar_engine.detokenize(asked.tokens).strip()
    assert "teacher_message" not in instructions(1)[0].record()


def test_cut_points_fall_after_sentences_and_paragraphs() -> None:
    text = "One two. Three four!\n\nFive six? Seven"
    assert [text[:cut].rstrip() for cut in cut_points(text)] == [
        "One two.",
        "One two. Three four!",
        "One two. Three four!\n\nFive six?",
    ]


def test_rewrites_quote_training_paragraphs_and_notes_with_names_and_numbers() -> None:
    paragraphs = paragraphs_of(DOCUMENTS)
    assert paragraphs and all(len(p) >= 80 and cut_points(p) for p in paragraphs)
    made = rewrite_instructions(40, paragraphs, seed=0)
    assert len(made) == 40 and made[0].id == REWRITE_FIRST_ID
    for instruction in made:
        slots = dict(instruction.slots)
        assert instruction.text == rewrite_instruction(slots["ask"], slots["selection"])
        if slots["selection"] in paragraphs:
            assert not held_out_value(slots["selection"])
    notes = [dict(i.slots)["selection"] for i in made if dict(i.slots)["selection"] not in paragraphs]
    assert notes and all(any(c.isdigit() for c in note) for note in notes)


def test_a_rewrite_is_learned_only_if_it_keeps_the_numbers_and_is_the_passage() -> None:
    selection = "the repair is 260 pounds plus 3 hours of work. Jonas thinks a new one for $900 is better."
    assert faithful_rewrite(selection, "The repair costs 260 pounds and 3 hours; Jonas prefers a new one at $900.")
    assert not faithful_rewrite(selection, "The repair costs 260 pounds; Jonas prefers a new one.")
    assert not faithful_rewrite(selection, "Here is the revised version: 260 pounds, 3 hours, $900.")


def test_the_teacher_drafts_without_repeating_itself(ar_engine: LlamaAREngine, tmp_path: Path) -> None:
    """With the AR drafts' loop control, no greedy draft the teacher writes repeats a run of three tokens."""
    out = tmp_path / "drafts.jsonl"
    made = make_pairs(ar_engine, out, instructions(3), max_tokens=96, parallel=2, no_repeat_ngram=3)
    assert made == 3
    for record in map(json.loads, out.read_text().splitlines()):
        tokens = ar_engine.tokenize(record["draft"], add_bos=False)
        runs = [tuple(tokens[i : i + 3]) for i in range(len(tokens) - 2)]
        assert record["no_repeat_ngram"] == 3 and record["draft_tokens"] > 20
        # Detokenizing and tokenizing again may merge a token pair differently; allow one such seam.
        assert len(runs) - len(set(runs)) <= 1, record["draft"]


def test_a_draft_into_a_document_is_learned_only_if_it_is_new_text(tmp_path: Path) -> None:
    before, after = "Dear Sam,\n\nThe picnic is on Saturday at noon in the park by the river.", "Best, Ana"
    assert new_text(before, after, "Please bring a blanket and something to drink.")
    assert not new_text(before, after, "The document, up to where your text goes:\n\nBring a blanket.")
    assert not new_text(before, after, "The picnic is on Saturday at noon in the park by the river. Bring food.")
    path = tmp_path / "documents.jsonl"
    slots = {"ask": "Add a sentence.", "before": before, "after": after}
    records = [
        {"id": 1, "kind": "document", "slots": slots, "text": "t", "draft": "Bring a hat.", "finish_reason": "eos"},
        {"id": 2, "kind": "document", "slots": slots, "text": "t", "draft": f"{before} Hi.", "finish_reason": "eos"},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    assert [pair.id for pair in load_pairs(path)] == [1]
