"""Training data for the embedded diffusion model: varied instructions, resumable generation."""

from __future__ import annotations

import json
from pathlib import Path

from app.training_data import answered_ids, make_pairs
from engines.llama_ar import LlamaAREngine
from models.training.prompts import instructions


def test_instructions_vary_and_repeat_per_seed() -> None:
    made = instructions(300, seed=1)
    assert len({i.text for i in made}) == 300
    assert len({i.topic for i in made}) > 30 and len({i.recipient for i in made}) > 10
    assert [i.text for i in instructions(20, seed=1)] == [i.text for i in made[:20]]
    assert instructions(5, seed=2)[0].text != made[0].text
    assert made[0].text.startswith("Write ") and made[0].text.endswith(".")


def test_generation_writes_pairs_and_resumes(ar_engine: LlamaAREngine, tmp_path: Path) -> None:
    out = tmp_path / "drafts.jsonl"
    assert make_pairs(ar_engine, out, 2, max_tokens=8) == 2
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["id"] for r in records] == [0, 1]
    assert all(r["draft"] and r["text"].startswith("Write ") and r["model"] == "smollm2-135m-instruct" for r in records)
    with out.open("a") as handle:
        handle.write('{"id": 2, "draft": "cut of')  # a run killed mid-line
    assert answered_ids(out) == {0, 1}
    assert make_pairs(ar_engine, out, 3, max_tokens=8) == 1
    assert [json.loads(line)["id"] for line in out.read_text().splitlines()] == [0, 1, 2]
