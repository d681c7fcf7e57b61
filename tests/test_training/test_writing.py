"""The writing adapter's data and training (training/writing_cases.py, training/write.py).

Real parts: the bench's own scorers judge the composed targets; the tiny random llama GGUF (SmolLM2's
tokenizer and template) stands in for the base; llama.cpp runs the merged AR adapter against torch.
"""

from __future__ import annotations

import json
import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="training the adapter needs the torch extra")

from lora_support import random_lora  # noqa: E402

from app.domain.context import continued_reply  # noqa: E402
from engines.llama_ar import LlamaAREngine, LlamaSettings  # noqa: E402
from models.adapted import adapter_info, merge_lora, write_adapter  # noqa: E402
from training.adapt.lora import base_model  # noqa: E402
from training.write import Encoder, WritePlan, run  # noqa: E402
from training.writing_cases import MAKERS, occurrences, writing_cases  # noqa: E402
from training.writing_clauses import clause_cases  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
from faithful_scores import copied_back, placeholders, stance_kept  # noqa: E402

CASES = writing_cases(660) + clause_cases(400)


def test_every_case_states_each_fact_asked_once_and_keeps_its_stance() -> None:
    for case in CASES:
        for fact in case.facts:
            assert occurrences(fact, case.target) == 1, (fact, case.target)
            assert occurrences(fact, case.instruction) + occurrences(fact, case.before) >= 1, (fact, case)
        verdict = stance_kept(case.target, case.stance)  # type: ignore[arg-type]
        assert verdict is None or verdict.verdict == "kept", (case.stance, case.target, verdict)
    assert {case.stance for case in CASES} == {"decline", "accept", "apologise", "none"}


def test_the_targets_copy_nothing_back_and_name_only_the_documents_people() -> None:
    for case in CASES:
        assert copied_back(case.target, case.before, case.after, case.instruction) is None, case
        assert not placeholders(case.target), case.target
        # The document goes on into the target: a new sentence is spaced from the one before the cursor.
        assert case.before[-1:].isspace() or case.target[:1].isspace() or case.before.endswith(":"), case


def test_no_case_is_of_a_kind_the_benchmark_holds_out() -> None:
    held_out = set(tomllib.loads((ROOT / "bench/data/faithful_cases.toml").read_text())["held_out_kinds"])
    assert not held_out & set(MAKERS)
    assert {case.kind for case in CASES} == {*MAKERS, "clauses"}


def test_a_case_is_the_same_whatever_the_count() -> None:
    assert writing_cases(30)[:12] == writing_cases(12)
    assert clause_cases(30)[:12] == clause_cases(12)


def test_the_encoder_lays_a_case_out_as_the_ar_engine_does(tiny_llama_path: Path) -> None:
    """What the adapter learns from is token for token what the AR drafter gives the engine, then the text."""
    engine = LlamaAREngine(tiny_llama_path, "tiny", LlamaSettings(n_ctx=1024))
    encoder = Encoder(tiny_llama_path, max_answer=200)
    for case in CASES[:12]:
        laid_out = continued_reply(case.instruction, case.before, case.after)
        row = encoder.case(case)
        assert row.prompt == engine.chat_prompt(laid_out.request, 200, laid_out.reply_start)
        written = engine.tokenize(laid_out.held_back + case.target, add_bos=False, special=False)
        assert row.answer == [*written, encoder.eos]


def test_a_merged_ar_adapter_computes_what_torch_computes(tiny_llama_path: Path, tmp_path: Path) -> None:
    """The AR adapter merged into its base (F32) runs in llama.cpp as the causal model torch trains."""
    model = base_model(tiny_llama_path).eval()
    lora = random_lora(model, rank=4)
    adapter = write_adapter(tmp_path / "w.gguf", tiny_llama_path, lora, alpha=4.0, name="w", diffusion=False)
    assert not adapter_info(adapter).makes_diffusion  # an AR adapter: its base stays causal
    merged = merge_lora(tiny_llama_path, adapter, tmp_path / "merged.gguf", "F32", 1.0)
    engine = LlamaAREngine(merged, "merged", LlamaSettings(n_ctx=256))
    tokens = engine.chat_prompt("Write a note.", 8, "Dear Sam,")
    engine._llama.reset()
    engine._llama.eval(tokens)
    vocab = engine._llama.n_vocab()
    ours = np.ctypeslib.as_array(engine._llama._ctx.get_logits(), shape=(vocab,)).copy()
    with torch.no_grad():
        causal = torch.ones(len(tokens), len(tokens), dtype=torch.bool).tril()
        hidden, _ = model(torch.tensor(tokens)[None], torch.arange(len(tokens)), mask=causal)
        theirs = model.logits(hidden[0, -1]).numpy()
    assert np.allclose(ours, theirs, atol=3e-3, rtol=1e-3)


def test_a_short_run_writes_an_ar_adapter_and_resumes(tiny_llama_path: Path, tmp_path: Path) -> None:
    open_pairs = tmp_path / "open.jsonl"
    rows = [{"id": i, "text": f"Write a line about {w}.", "draft": f"A line about {w}."} for i, w in enumerate("abcd")]
    open_pairs.write_text("".join(json.dumps({**row, "finish_reason": "eos"}) + "\n" for row in rows))
    plan = WritePlan(
        out=tmp_path / "out",
        base=tiny_llama_path,
        cases=8,
        clauses=8,
        open_data=(open_pairs,),
        max_steps=2,
        batch=4,
        eval_every=2,
        rank=2,
    )
    adapter = run(plan, log=lambda _line: None)
    assert adapter.is_file()
    assert not adapter_info(adapter).makes_diffusion  # an AR adapter: no mask token, not a drafter
    resumed = run(WritePlan(**{**plan.__dict__, "max_steps": 4, "resume": True}), log=lambda _line: None)
    log = (resumed.parent / "training_log.csv").read_text().splitlines()
    assert [line.split(",")[0] for line in log] == ["step", "0", "2", "4"]
