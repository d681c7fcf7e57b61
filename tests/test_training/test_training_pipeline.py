"""The embedded model's training pipeline, end to end on a tiny slice, and the exported GGUF in llama.cpp."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the training pipeline needs the torch extra")

from engines.diffusion.engine import DiffusionEngine  # noqa: E402
from engines.diffusion.hf.backend import TorchDiffusionBackend  # noqa: E402
from engines.diffusion.llama_backend import LlamaDiffusionBackend  # noqa: E402
from engines.diffusion.load_settings import DiffusionLoadSettings  # noqa: E402
from engines.diffusion.settings import DiffusionSettings  # noqa: E402
from engines.events import DiffusionStats, Done  # noqa: E402
from models.transformer import Block  # noqa: E402
from training.export import export_gguf  # noqa: E402
from training.model import ModelShape, all_logits, build_model, from_interleaved_layout  # noqa: E402
from training.tokenizer import special_ids, train_tokenizer  # noqa: E402
from training.train import (  # noqa: E402
    TrainingPlan,
    canvas_cut,
    continued_log,
    load_state,
    read_log,
    run,
    saved_layers,
)

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
    in_llama = LlamaDiffusionBackend(report.gguf, DiffusionLoadSettings(n_ctx=256))
    engine = DiffusionEngine(in_llama, "trained")
    assert in_llama.cache_mode == "dual" and in_llama.shift == 0
    events = list(
        engine.draft("Write a short note to a friend.", 16, DiffusionSettings.reference(steps=4, block_length=8))
    )
    done = events[-1]
    assert isinstance(done, Done) and isinstance(done.stats, DiffusionStats) and done.stats.passes <= 4
    # The same weights as a LLaDA checkpoint folder: the torch backend serves them and agrees with llama.cpp
    # on the prompt (Q8_0 in the GGUF against float32 in the folder: argmax only).
    folder = plan.out / "sharpen-draft-hf"
    in_torch = TorchDiffusionBackend(folder, DiffusionLoadSettings(n_ctx=128, cache="none"))
    instruction = "Write a short note to a friend."
    assert in_torch.instruction_tokens(instruction) == engine.backend.instruction_tokens(instruction)
    continued = run(
        TrainingPlan(**{**plan.__dict__, "out": tmp_path / "again", "init_from": plan.out / "checkpoint.pt"}),
        log=lambda _line: None,
    )
    assert continued.steps == 3
    # The continued run's log follows the first run's: steps and tokens count on, stage 2 is marked.
    first = read_log(plan.out / "training_log.csv")
    both = read_log(tmp_path / "again" / "training_log.csv")
    assert both[: len(first)] == [{**row, "stage": 1.0} for row in first]
    assert both[-1]["step"] == 6 and both[-1]["tokens_seen"] == 2 * report.tokens_seen and both[-1]["stage"] == 2
    assert "stage 2" in (tmp_path / "again" / "training_curve.svg").read_text()
    # Grown deeper: it starts out computing exactly what the checkpoint computes, and trains on.
    trained = ModelShape(**{**shape.__dict__, "vocab_size": 300})  # the tokenizer's size
    deeper = ModelShape(**{**trained.__dict__, "layers": 5})
    tokens = torch.randint(0, 300, (2, 24))
    grown = build_model(deeper, 1, 0)
    grown.load_state_dict(load_state(plan.out / "checkpoint.pt", deeper))
    saved = build_model(trained, 1, 0)
    saved.load_state_dict(load_state(plan.out / "checkpoint.pt", trained))
    assert torch.allclose(all_logits(grown, tokens), all_logits(saved, tokens), atol=1e-5)
    grown_block = grown.blocks[1]
    assert isinstance(grown_block, Block)
    assert not torch.equal(grown_block.gate.weight, torch.zeros_like(grown_block.gate.weight))
    deepened_run = run(
        TrainingPlan(
            **{**plan.__dict__, "out": tmp_path / "deeper", "init_from": plan.out / "checkpoint.pt", "shape": deeper}
        ),
        log=lambda _line: None,
    )
    assert deepened_run.steps == 3 and deepened_run.parameters > report.parameters
    # Continuing the grown model takes its depth from the checkpoint (train.py's --layers default).
    assert saved_layers(tmp_path / "deeper" / "checkpoint.pt") == 5 and saved_layers(None) == ModelShape.layers
    with pytest.raises(ValueError, match="holds a model of shape"):
        load_state(plan.out / "checkpoint.pt", ModelShape(**{**trained.__dict__, "layers": 1}))


def test_batches_are_cut_to_varied_lengths() -> None:
    """Drafts are asked for at many lengths, so training sees canvases of many lengths."""
    plan = TrainingPlan(data=Path("drafts.jsonl"), out=Path("out"), length=320, min_length=96)
    generator = torch.Generator().manual_seed(0)
    cuts = [canvas_cut(plan, generator) for _ in range(300)]
    assert min(cuts) == 96 and max(cuts) == 320 and all(cut % 8 == 0 for cut in cuts)
    assert len(set(cuts)) == (320 - 96) // 8 + 1


def test_llama_cpp_computes_what_torch_computes(tmp_path: Path) -> None:
    """The export is faithful: the same logits from the torch model and from llama.cpp on its F32 GGUF."""
    tokenizer = train_tokenizer([draft for _, draft in DRAFTS], vocab_size=300)
    shape = ModelShape(vocab_size=tokenizer.get_vocab_size(), width=64, layers=2, heads=2, ffn=96, max_positions=128)
    torch.manual_seed(0)
    ids = special_ids(tokenizer)
    model = build_model(shape, ids.mask, ids.eos).eval()
    for parameter in model.parameters():  # larger weights than the training init, so differences show
        torch.nn.init.normal_(parameter, std=0.2)
    state = {name: tensor.detach().numpy() for name, tensor in model.state_dict().items()}
    path = export_gguf(state, shape, tokenizer, tmp_path / "f32.gguf", q8=False, name="parity")
    sequence = np.array([ids.user, *tokenizer.encode("Hi Sam, the picnic").ids, ids.assistant, *[ids.mask] * 8])
    backend = LlamaDiffusionBackend(path, DiffusionLoadSettings(n_ctx=256, cache="none"))
    ours = backend.logits(sequence, 0, len(sequence), 0)
    with torch.no_grad():
        theirs = all_logits(model, torch.tensor(sequence)[None])[0].numpy()
    assert np.allclose(ours, theirs, atol=2e-3, rtol=1e-3)
    assert (ours.argmax(1) == theirs.argmax(1)).all()


def test_the_first_models_checkpoints_convert_to_the_shared_module() -> None:
    """q and k rows in ggml's interleaved order become Hugging Face's rotate_half order: the same function."""
    heads, head_dim, width = 2, 8, 16
    torch.manual_seed(1)
    x = torch.randn(1, 5, width)
    q = torch.randn(width, width)
    interleaved = (x @ q.T).view(1, 5, heads, head_dim)
    positions = torch.arange(5).float()[:, None, None]
    inverse = 1.0 / (10000 ** (torch.arange(0, head_dim, 2).float() / head_dim))
    angle = positions * inverse
    even, odd = interleaved[..., 0::2], interleaved[..., 1::2]
    rotated_old = torch.stack((even * angle.cos() - odd * angle.sin(), even * angle.sin() + odd * angle.cos()), -1)
    converted = from_interleaved_layout({"blocks.0.q.weight": q}, heads)["blocks.0.attention.q.weight"]
    halves = (x @ converted.T).view(1, 5, heads, head_dim)
    cos, sin = torch.cat((angle, angle), -1).cos(), torch.cat((angle, angle), -1).sin()
    rotate_half = torch.cat((-halves[..., head_dim // 2 :], halves[..., : head_dim // 2]), -1)
    rotated_new = halves * cos + rotate_half * sin
    # Same dot products between any two positions' rotated vectors: attention is unchanged.
    old = rotated_old.flatten(-2)
    assert torch.allclose(old @ old.transpose(-1, -2), rotated_new @ rotated_new.transpose(-1, -2), atol=1e-4)


def test_block_rows_show_the_state_block_decoding_meets() -> None:
    from training.model import draw_masks

    answer = torch.arange(100)[None, :].repeat(64, 1) >= torch.randint(5, 30, (64, 1))
    draw = draw_masks(answer, torch.Generator().manual_seed(0), block_share=1.0, block_length=32)
    checked = 0
    for row in range(64):
        starts = int(answer[row].float().argmax())
        learned = torch.nonzero(draw.learned[row]).flatten()
        assert not draw.masked[row, :starts].any()  # the prompt is never masked
        if len(learned) == 0:
            continue
        checked += 1
        lo = starts + (int(learned[0]) - starts) // 32 * 32  # the block being decoded
        hi = min(100, lo + 32)
        assert not draw.masked[row, starts:lo].any()  # finished blocks are clean
        assert draw.masked[row, hi:].all()  # later blocks are fully masked
        assert ((learned >= lo) & (learned < hi)).all() and draw.denominator[row] == hi - lo
    assert checked >= 48  # almost every row learns something, so the checks above ran
    uniform = draw_masks(answer, torch.Generator().manual_seed(0))
    assert torch.equal(uniform.learned, uniform.masked) and torch.equal(uniform.denominator, answer.sum(1).float())
    # Masking rates follow t across the rows.
    rates = (uniform.masked.sum(1) / answer.sum(1)).float()
    assert torch.corrcoef(torch.stack([rates, uniform.t[:, 0]]))[0, 1] > 0.9


def test_a_log_continued_twice_counts_on_and_marks_each_stage() -> None:
    def rows(steps: list[int]) -> list[dict[str, float]]:
        return [
            {"step": s, "tokens_seen": 10.0 * s, "train_loss": 2.0, "heldout_loss": 1.0, "minutes": s / 2}
            for s in steps
        ]

    two = continued_log(continued_log([], rows([1, 4])), rows([1, 3]))
    three = continued_log(two, rows([2]))
    assert [r["step"] for r in three] == [1, 4, 5, 7, 9]
    assert [r["stage"] for r in three] == [1, 1, 2, 2, 3]
    assert three[-1]["tokens_seen"] == 90 and three[-1]["minutes"] == 4.5
