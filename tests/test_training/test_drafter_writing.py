"""The writing cases as the block-causal drafter's training data (training/adapt/writing.py).

Real parts: the tiny random llama GGUF (SmolLM2's tokenizer and template) with a block-causal adapter stands
in for the drafter, the drafter's own code lays out the request and llama.cpp's engine tokenizes it, and the
training loop runs on the tiny base.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch", reason="training the drafter needs the torch extra")

from lora_support import random_lora, tiny_plan  # noqa: E402

from app.domain.draft_request import DraftRequest  # noqa: E402
from app.orchestration.drafters import DiffusionDrafter  # noqa: E402
from engines.diffusion.engine import DiffusionEngine  # noqa: E402
from engines.diffusion.llama_backend import LlamaDiffusionBackend  # noqa: E402
from engines.diffusion.load_settings import DiffusionLoadSettings  # noqa: E402
from engines.diffusion.settings import DiffusionSettings  # noqa: E402
from models.adapted import BlockDecoding, write_adapter  # noqa: E402
from router.request import Route  # noqa: E402
from training.adapt.examples import encode_data, encode_pairs  # noqa: E402
from training.adapt.lora import base_model  # noqa: E402
from training.adapt.run import run  # noqa: E402
from training.adapt.writing import writing_count, writing_pairs  # noqa: E402
from training.data import is_held_out  # noqa: E402
from training.writing_cases import writing_cases  # noqa: E402
from training.writing_clauses import clause_cases  # noqa: E402


class Recording(DiffusionEngine):
    """The real engine, noting the instruction each draft is given."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.given: list[Any] = []

    def draft(self, instruction: Any, *args: Any, **kwargs: Any) -> Iterator[Any]:
        self.given.append(instruction)
        return super().draft(instruction, *args, **kwargs)


def test_a_writing_pair_is_token_for_token_what_the_drafter_gives_the_engine(
    tiny_llama_path: Path, tmp_path: Path
) -> None:
    model = base_model(tiny_llama_path)
    adapter = write_adapter(
        tmp_path / "lora.gguf", tiny_llama_path, random_lora(model, 2), alpha=2.0, name="t", decoding=BlockDecoding(4)
    )
    engine = Recording(LlamaDiffusionBackend(tiny_llama_path, DiffusionLoadSettings(n_ctx=1024), adapter=adapter), "t")
    drafter = DiffusionDrafter(lambda: engine)
    made = writing_cases(3) + clause_cases(3)
    pairs = writing_pairs(6)
    examples, eos = encode_pairs(tiny_llama_path, pairs, max_answer=200)
    assert [pair.draft for pair in pairs] == [case.target for case in made]
    for case, example in zip(made, examples, strict=True):
        request = DraftRequest("draft", case.instruction, before=case.before, after=case.after, tokens=4)
        opened = drafter.draft(request, 4, Route("diffusion", "t", 4), DiffusionSettings(block_length=4), None).open()
        list(opened.events)
        assert opened.context is not None and (opened.context.before, opened.context.after) == (case.before, case.after)
        assert example.prompt == engine.instruction_prompt(engine.given[-1])
        assert example.answer == [*engine.backend.tokenize(case.target, add_bos=False), eos]
        assert case.instruction in engine.given[-1] and case.before.strip() in engine.given[-1]


def test_the_writing_share_is_the_share_of_the_training_pairs(tiny_llama_path: Path, tmp_path: Path) -> None:
    assert writing_count(0.0, 100) == 0 and writing_count(0.7, 300) == 700
    with pytest.raises(ValueError, match="below 1"):
        writing_count(1.0, 10)
    data = tiny_plan(tiny_llama_path, tmp_path).data
    alone = encode_data(data, tiny_llama_path, 200)
    mixed = encode_data(data, tiny_llama_path, 200, writing_share=0.75)
    made = [pair for pair in writing_pairs(writing_count(0.75, len(alone.train))) if not is_held_out(pair)]
    assert len(mixed.train) == len(alone.train) + len(made) and made
    assert mixed.held == alone.held  # the files' held-out pairs are evaluated as before


def test_block_training_with_writing_cases_runs_and_resumes(tiny_llama_path: Path, tmp_path: Path) -> None:
    lines: list[str] = []
    plan = tiny_plan(tiny_llama_path, tmp_path, writing_share=0.5)
    assert run(plan, log=lines.append).is_file()
    assert lines[0].startswith("6 training pairs")  # the file's 3 distinct pairs and 3 writing cases
    resumed = run(tiny_plan(tiny_llama_path, tmp_path, writing_share=0.5, max_steps=3, resume=True), log=print)
    log = (resumed.parent / "training_log.csv").read_text().splitlines()
    assert [line.split(",")[0] for line in log] == ["step", "0", "1", "2", "3"]
