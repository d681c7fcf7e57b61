"""The embedded model's training pipeline, end to end on a tiny slice, and the exported GGUF in llama.cpp."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the training pipeline needs the torch extra")

from engines.diffusion.engine import DiffusionEngine  # noqa: E402
from engines.diffusion.llama_backend import LlamaDiffusionBackend, LlamaDiffusionSettings  # noqa: E402
from engines.diffusion.settings import DiffusionSettings  # noqa: E402
from engines.events import Done  # noqa: E402
from models.training.export import export_gguf  # noqa: E402
from models.training.model import DiffusionLM, ModelShape  # noqa: E402
from models.training.tokenizer import special_ids, train_tokenizer  # noqa: E402
from models.training.train import TrainingPlan, run  # noqa: E402

DRAFTS = [
    ("Write a short note to a friend about the picnic.", "Hi Sam, the picnic is on Saturday at noon. Bring a hat!"),
    ("Write an email to the team about the meeting.", "Dear team, our weekly meeting moves to Thursday at ten."),
    ("Write a reminder to a neighbour about the ladder.", "Hello, could you bring back the ladder this weekend?"),
    ("Write a thank-you note to a teacher.", "Dear Ms Park, thank you for a wonderful year of lessons."),
] * 6


def write_slice(path: Path) -> Path:
    with path.open("w") as handle:
        for index, (instruction, draft) in enumerate(DRAFTS):
            handle.write(json.dumps({"id": index, "text": instruction, "draft": draft}) + "\n")
    return path


def test_pipeline_runs_end_to_end_and_the_export_drafts(tmp_path: Path) -> None:
    shape = ModelShape(width=64, layers=2, heads=2, ffn=96, max_positions=128)
    plan = TrainingPlan(
        data=write_slice(tmp_path / "drafts.jsonl"),
        out=tmp_path / "out",
        max_steps=3,
        length=48,
        batch=4,
        vocab_size=300,
        shape=shape,
        eval_every=2,
    )
    report = run(plan, log=lambda _line: None)
    assert report.steps == 3 and report.tokens_seen == 3 * 4 * 48
    assert np.isfinite(report.train_loss) and np.isfinite(report.heldout_loss)
    assert (plan.out / "tokenizer.json").is_file() and (plan.out / "training_log.csv").read_text().count("\n") >= 3
    assert "<polyline" in (plan.out / "training_curve.svg").read_text()
    engine = DiffusionEngine(LlamaDiffusionBackend(report.gguf, LlamaDiffusionSettings(n_ctx=256)), "trained")
    assert engine.backend.uses_prefix_cache and engine.backend.shift == 0
    events = list(engine.draft("Write a short note to a friend.", 16, DiffusionSettings(steps=4, block_length=8)))
    assert isinstance(events[-1], Done) and events[-1].stats.passes <= 4  # type: ignore[union-attr]


def test_llama_cpp_computes_what_torch_computes(tmp_path: Path) -> None:
    """The export is faithful: the same logits from the torch model and from llama.cpp on its F32 GGUF."""
    tokenizer = train_tokenizer([draft for _, draft in DRAFTS], vocab_size=300)
    shape = ModelShape(vocab_size=tokenizer.get_vocab_size(), width=64, layers=2, heads=2, ffn=96, max_positions=128)
    torch.manual_seed(0)
    model = DiffusionLM(shape).eval()
    for parameter in model.parameters():  # larger weights than the training init, so differences show
        torch.nn.init.normal_(parameter, std=0.2)
    state = {name: tensor.detach().numpy() for name, tensor in model.state_dict().items()}
    path = export_gguf(state, shape, tokenizer, tmp_path / "f32.gguf", q8=False, name="parity")
    ids = special_ids(tokenizer)
    sequence = np.array([ids.user, *tokenizer.encode("Hi Sam, the picnic").ids, ids.assistant, *[ids.mask] * 8])
    backend = LlamaDiffusionBackend(path, LlamaDiffusionSettings(n_ctx=256, cache=False))
    ours = backend.logits(sequence, 0, len(sequence), 0)
    with torch.no_grad():
        theirs = model(torch.tensor(sequence)[None])[0].numpy()
    assert np.allclose(ours, theirs, atol=2e-3, rtol=1e-3)
    assert (ours.argmax(1) == theirs.argmax(1)).all()
