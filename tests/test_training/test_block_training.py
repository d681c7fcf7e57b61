"""The drafter trained for block diffusion: the two-stream objective computes exactly what llama.cpp's block
cache decodes, the adapter says how it is decoded, and a stopped run resumes.

Real parts: the tiny random llama GGUF stands in for SmolLM2 as the base, llama.cpp applies the adapter
and decodes block by block against its KV cache, and torch computes the training objective's rows.
"""

from __future__ import annotations

import csv
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="training the drafter needs the torch extra")

from lora_support import random_lora, tiny_plan  # noqa: E402

from engines.diffusion.llama_backend import LlamaDiffusionBackend  # noqa: E402
from engines.diffusion.load_settings import DiffusionLoadSettings  # noqa: E402
from models.adapted import (  # noqa: E402
    MASK_TOKEN_ID,
    BlockDecoding,
    adapted_model,
    adapter_info,
    read_lora,
    write_adapter,
    write_merged_file,
)
from models.gguf_info import inspect_gguf  # noqa: E402
from training.adapt.lora import add_lora, base_model, load_adapter  # noqa: E402
from training.adapt.run import run  # noqa: E402
from training.block_loss import (  # noqa: E402
    block_causal_logits,
    block_causal_loss,
    complementary_masks,
    one_pass_loss,
    training_masks,
    two_stream_mask,
)
from training.one_pass import THRESHOLDS, OnePassTally, tally_one_pass  # noqa: E402


def test_the_streams_attend_as_the_block_cache_does() -> None:
    mask = two_stream_mask(6, 2, 2, copies=2)  # clean 0..5, two noisy copies of 2..5; blocks {0,1} {2,3} {4,5}
    clean_row_3 = [True, True, True, True, False, False, *[False] * 8]
    noisy_row_4 = [True, True, True, True, False, False, False, False, True, True, *[False] * 4]
    noisy_row_2 = [True, True, False, False, False, False, True, True, False, False, *[False] * 4]
    second_copy_row_4 = [True, True, True, True, False, False, *[False] * 4, False, False, True, True]
    assert mask[3].tolist() == clean_row_3
    assert mask[6 + 2].tolist() == noisy_row_4  # position 4 is the first noisy stream's third row
    assert mask[6].tolist() == noisy_row_2
    assert mask[6 + 4 + 2].tolist() == second_copy_row_4


def test_complementary_masks_mask_every_answer_position_once() -> None:
    answer = torch.tensor([[False, False, True, True, True, True, True]])
    masked = complementary_masks(answer, torch.Generator().manual_seed(3))
    assert masked.shape == (2, 1, 7)
    assert torch.equal(masked[0] ^ masked[1], answer) and not bool((masked[0] & masked[1]).any())


def test_rows_drawn_whole_mask_their_whole_answer_and_keep_a_random_draw_beside_it() -> None:
    answer = (torch.arange(9) >= 2).repeat(64, 1)
    masked = training_masks(answer, torch.Generator().manual_seed(5), whole_share=0.5)
    whole = (masked[0] == answer).all(dim=1)
    assert 10 < int(whole.sum()) < 54  # about half of 64 rows, and not all or none
    assert not bool((masked & ~answer).any())  # never a prompt position
    # The partner of a whole row is a random draw, not its (empty) complement: something is learned in it.
    assert bool(masked[1][whole].any())
    unchanged = training_masks(answer, torch.Generator().manual_seed(5))
    assert torch.equal(unchanged, complementary_masks(answer, torch.Generator().manual_seed(5)))


def test_one_pass_loss_is_the_loss_with_every_answer_position_masked(tiny_llama_path: Path) -> None:
    model = base_model(tiny_llama_path).eval()
    tokens = torch.tensor([[1, 2, 3, 4, 5, 600, 601, 602, 603, 604, 605, 606]])
    answer = torch.arange(12)[None] >= 5
    one_pass = one_pass_loss(model, tokens, answer, 4)
    logits, targets = block_causal_logits(model, tokens, answer[None], 4)
    assert one_pass.counted == 7 and torch.equal(targets, tokens[0, 5:])
    assert one_pass.loss.item() == pytest.approx(torch.nn.functional.cross_entropy(logits, targets).item())


@pytest.mark.parametrize("block_length", [4, 8])
def test_training_rows_are_what_llama_cpp_decodes_block_by_block(
    tiny_llama_path: Path, tmp_path: Path, block_length: int
) -> None:
    """A block partly masked after settled blocks: the rows the objective learns from equal the logits the
    llama.cpp backend's block cache computes for that block (prompt's whole blocks cleaned, the previous
    block's last clean row for the block's first position)."""
    model = base_model(tiny_llama_path).eval()
    lora = random_lora(model, rank=4)
    decoding = BlockDecoding(block_length)
    path = write_adapter(tmp_path / "lora.gguf", tiny_llama_path, lora, alpha=4.0, name="block", decoding=decoding)
    backend = LlamaDiffusionBackend(tiny_llama_path, DiffusionLoadSettings(n_ctx=128), adapter=path)
    assert backend.cache_mode == "block" and backend.gguf.block_causal_length == block_length
    prompt = backend.instruction_tokens("Write a short note about the picnic.")
    rng = np.random.default_rng(0)
    answer = [int(t) for t in rng.integers(300, 2000, size=3 * block_length)]
    sequence = np.array([*prompt, *answer])
    lo = len(prompt) + block_length - len(prompt) % block_length  # the second aligned block of the answer
    hidden = [lo, lo + 2, lo + block_length - 1]  # the block's first position among its masks
    state = sequence.copy()
    state[hidden] = MASK_TOKEN_ID
    backend.reset(cache=True, block_length=block_length)
    ours = backend.logits(state[: lo + block_length], lo, lo + block_length, lo)[[h - lo for h in hidden]]
    masked = torch.zeros((2, 1, len(sequence)), dtype=torch.bool)
    masked[0, 0, hidden] = True
    masked[1, 0, len(prompt) :] = True  # a second copy, wholly masked, beside it: the copies never meet
    with torch.no_grad():
        theirs, targets = block_causal_logits(model, torch.tensor(sequence)[None], masked, block_length)
    assert targets[: len(hidden)].tolist() == sequence[hidden].tolist()
    assert np.allclose(ours, theirs[: len(hidden)].numpy(), atol=3e-3, rtol=1e-3)
    # The objective's noisy block really reads only settled blocks: a change after it changes nothing.
    later = sequence.copy()
    later[lo + block_length :] = 400
    with torch.no_grad():
        unchanged, _ = block_causal_logits(model, torch.tensor(later)[None], masked[:1], block_length)
    assert torch.allclose(unchanged, theirs[: len(hidden)], atol=1e-5)


def test_block_training_writes_an_adapter_decoded_block_causally_and_resumes(
    tiny_llama_path: Path, tmp_path: Path
) -> None:
    plan = tiny_plan(tiny_llama_path, tmp_path, block_lengths=(4, 8), whole_block_share=0.5)
    adapter = run(plan, log=lambda _line: None)
    info = adapter_info(adapter)
    assert info.block_decoding == BlockDecoding(4)
    first = (tmp_path / "out" / "training_log.csv").read_text().splitlines()
    assert [row.split(",")[0] for row in first] == ["step", "0", "1", "2"]
    run(replace(plan, max_steps=4, resume=True), log=lambda _line: None)
    rows = list(csv.DictReader((tmp_path / "out" / "training_log.csv").open()))
    assert [int(row["step"]) for row in rows] == [0, 1, 2, 3, 4]
    assert float(rows[-1]["tokens_seen"]) > float(rows[2]["tokens_seen"])
    assert all(0 <= float(row["one_pass_accuracy"]) <= 1 for row in rows)
    # The merged copy is a block-causal diffusion GGUF, which the backend decodes with the block cache.
    model = adapted_model(info, {"tiny": tiny_llama_path}, None)
    merged = write_merged_file(model, tmp_path / "merged.gguf", "F32")
    assert inspect_gguf(merged).block_causal_length == 4
    assert LlamaDiffusionBackend(merged, DiffusionLoadSettings(n_ctx=64)).cache_mode == "block"


def test_the_block_loss_learns(tiny_llama_path: Path) -> None:
    """A few optimiser steps on one batch lower the objective: its gradient reaches the LoRA."""
    from training.adapt.lora import add_lora

    model = base_model(tiny_llama_path)
    wrapped = add_lora(model, 4, 4.0)
    trainable = [p for layer in wrapped.values() for p in (layer.a, layer.b)]
    optimizer = torch.optim.AdamW(trainable, lr=1e-2)
    tokens = torch.tensor([[1, 2, 3, 4, 5, 600, 601, 602, 603, 604, 605, 606]])
    answer = torch.arange(12)[None] >= 5

    def loss() -> Any:
        return block_causal_loss(model, tokens, answer, torch.Generator().manual_seed(0), 4).loss

    before = loss().item()
    for _ in range(8):
        optimizer.zero_grad()
        loss().backward()
        optimizer.step()
    assert loss().item() < before - 0.5


def test_a_block_causal_drafter_reads_the_document_in_its_request(tiny_llama_path: Path, tmp_path: Path) -> None:
    """A block-causal model never reads past its block, so a draft into a document gives it the text after
    the cursor in the request, laid out as the AR drafter and the training data lay it out."""
    from app.domain.context import document_instruction
    from app.domain.draft_request import DraftRequest
    from app.orchestration.drafters import DiffusionDrafter
    from engines.diffusion.engine import DiffusionEngine
    from engines.diffusion.settings import DiffusionSettings
    from engines.events import Done
    from router.request import Route

    model = base_model(tiny_llama_path)
    path = write_adapter(
        tmp_path / "lora.gguf", tiny_llama_path, random_lora(model, 2), alpha=2.0, name="t", decoding=BlockDecoding(4)
    )
    engine = DiffusionEngine(
        LlamaDiffusionBackend(tiny_llama_path, DiffusionLoadSettings(n_ctx=512), adapter=path), "t"
    )
    assert engine.block_causal
    request = DraftRequest("draft", "Add a sentence.", before="Dear Sam,\n\n", after="\n\nBest, Ana", tokens=8)
    drafter = DiffusionDrafter(lambda: engine)
    opened = drafter.draft(request, 8, Route("diffusion", "t", 8), DiffusionSettings(block_length=4), None).open()
    done = next(e for e in opened.events if isinstance(e, Done))
    laid_out = engine.instruction_prompt(document_instruction("Add a sentence.", "Dear Sam,\n\n", "\n\nBest, Ana"))
    assert done.stats.prompt_tokens == len(laid_out)
    assert opened.context is not None and opened.context.after == "\n\nBest, Ana"
    assert "Best, Ana" in engine.decode(laid_out)


def test_an_adapter_reads_back_as_the_lora_it_was_written_from(tiny_llama_path: Path, tmp_path: Path) -> None:
    """Training can start from a shipped adapter: reading it undoes the rotary row order it was written in."""
    lora = random_lora(base_model(tiny_llama_path), rank=2)
    path = write_adapter(tmp_path / "lora.gguf", tiny_llama_path, lora, alpha=2.0, name="t")
    read = read_lora(path, tiny_llama_path, lora)
    assert read.keys() == lora.keys()
    for name, (a, b) in lora.items():
        assert np.array_equal(read[name][0], a) and np.array_equal(read[name][1], b), name


def test_the_router_charges_a_block_causal_drafter_by_the_block_cache(
    tiny_llama_path: Path, tmp_path: Path, sharpen_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A drafter trained block-causally always decodes block by block, whatever diffusion.cache says: its
    estimate counts the block cache's passes and settled blocks riding along, not the dual cache's full
    passes."""
    from app.cli import main

    model = adapted_model(
        adapter_info(
            write_adapter(
                tmp_path / "lora.gguf",
                tiny_llama_path,
                random_lora(base_model(tiny_llama_path), 2),
                alpha=2.0,
                name="t",
                decoding=BlockDecoding(8),
            )
        ),
        {"tiny": tiny_llama_path},
        None,
    )
    merged = write_merged_file(model, tmp_path / "block-drafter.gguf", "F32")
    assert main(["config", "set", "models.draft", str(merged)]) == 0
    assert main(["config", "set", "diffusion.cache", "dual"]) == 0
    capsys.readouterr()
    assert main(["route", "--kind", "draft", "--tokens", "256", "--engine", "diffusion", "--explain"]) == 0
    explained = capsys.readouterr().out
    assert "with a settled block of 8 riding along" in explained and "block-causal cache" in explained, explained


def test_the_one_pass_tally_counts_each_block_by_offset_and_by_confidence(tiny_llama_path: Path) -> None:
    """Checked against the same logits grouped by hand: offsets from the aligned block starts, ranks from the
    top probability within each block, and the thresholds."""
    model = base_model(tiny_llama_path).eval()
    random_lora(model, rank=4)
    tokens = torch.tensor([[1, 2, 3, 4, 5, *range(600, 611)], [1, 2, 3, 700, 701, 702, 703, 704, *[2] * 8]])
    answer = torch.stack((torch.arange(16) >= 5, torch.arange(16) >= 3))
    tally = tally_one_pass(model, tokens, answer, OnePassTally(4))
    logits, targets = block_causal_logits(model, tokens, answer[None], 4)
    confidence, guesses = torch.softmax(logits, -1).max(-1)
    blocks: dict[tuple[int, int], list[tuple[float, bool]]] = {}
    right_at = [0] * 4
    for (row, position), sure, right in zip(
        answer.nonzero().tolist(), confidence.tolist(), (guesses == targets).tolist(), strict=True
    ):
        blocks.setdefault((row, position // 4), []).append((sure, right))
        right_at[position % 4] += right
    by_rank = [0] * 4
    for members in blocks.values():
        for rank, (_, right) in enumerate(sorted(members, key=lambda member: -member[0])):
            by_rank[rank] += right
    assert tally.blocks == len(blocks) == 7  # rows of 11 and 13 answer positions, blocks aligned from 0
    assert tally.counted_at == [5, 6, 6, 7] and sum(tally.counted_by_rank) == 24
    assert tally.right_at == right_at and tally.right_by_rank == by_rank
    assert tally.per_block(sum(right_at)) == pytest.approx(4 * sum(right_at) / 24)
    right = guesses == targets
    assert tally.confident == [int((confidence >= threshold).sum()) for threshold in THRESHOLDS]
    assert tally.confident_right == [int((right & (confidence >= threshold)).sum()) for threshold in THRESHOLDS]


def test_a_lower_rank_adapter_starts_a_higher_rank_run_with_the_same_function(
    tiny_llama_path: Path, tmp_path: Path
) -> None:
    """--init-from an adapter of rank 4 into a rank-8 LoRA (alpha 8): the same logits, and the added rank
    trains (its A is not zero, its B starts at zero)."""
    source = base_model(tiny_llama_path).eval()
    lora = random_lora(source, rank=4)
    path = write_adapter(tmp_path / "rank4.gguf", tiny_llama_path, lora, alpha=4.0, name="rank4")
    wider = base_model(tiny_llama_path).eval()
    wrapped = add_lora(wider, 8, 8.0)
    load_adapter(wrapped, path, tiny_llama_path)
    tokens = torch.tensor([[1, 2, 3, 4, 5, 6, 7, 8]])
    with torch.no_grad():
        expected, _ = source(tokens, torch.arange(8))
        got, _ = wider(tokens, torch.arange(8))
    assert torch.allclose(got, expected, atol=1e-4)
    layer = next(iter(wrapped.values()))
    assert bool(layer.a[4:].abs().sum() > 0) and not bool(layer.b[:, 4:].any())
    narrower = add_lora(base_model(tiny_llama_path), 2, 2.0)
    with pytest.raises(ValueError, match="rank 4"):
        load_adapter(narrower, path, tiny_llama_path)


def test_pairs_encoded_once_train_where_llama_cpp_is_missing_and_the_best_adapter_is_kept(
    tiny_llama_path: Path, tmp_path: Path
) -> None:
    """A GPU machine has torch but not llama.cpp: the pairs are encoded here, and the run from that file is
    the run from the data (the same first evaluation). The adapter at the lowest held-out loss is kept."""
    from training.adapt.examples import encode_data, read_examples, write_examples
    from training.selection import BEST_ADAPTER_NAME

    plan = tiny_plan(tiny_llama_path, tmp_path, out=tmp_path / "from-data", max_steps=3)
    examples = write_examples(encode_data(plan.data, tiny_llama_path, 200), tmp_path / "examples.pt")
    run(plan, log=lambda _line: None)
    run(replace(plan, data=(), examples=examples, out=tmp_path / "from-file"), log=lambda _line: None)
    logs = [list(csv.DictReader((tmp_path / name / "training_log.csv").open())) for name in ("from-data", "from-file")]
    assert logs[0][0]["heldout_loss"] == logs[1][0]["heldout_loss"]
    assert [row["step"] for row in logs[1]] == ["0", "1", "2", "3"]
    trained = logs[1][1:]
    best = min(range(len(trained)), key=lambda i: float(trained[i]["heldout_loss"]))
    kept = tmp_path / "from-file" / BEST_ADAPTER_NAME
    if float(trained[best]["heldout_loss"]) < float(logs[1][0]["heldout_loss"]):
        assert kept.exists()
        assert adapter_info(kept).block_decoding == BlockDecoding(4)
    else:
        assert not kept.exists()
    other = tmp_path / "other-base.gguf"
    other.write_bytes(tiny_llama_path.read_bytes() + b"\0")
    with pytest.raises(ValueError, match="another base"):
        read_examples(examples, other)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (none here: the device machine runs it)")
def test_block_training_runs_on_a_cuda_gpu(tiny_llama_path: Path, tmp_path: Path) -> None:
    adapter = run(tiny_plan(tiny_llama_path, tmp_path, bf16=True, device="cuda"), log=lambda _line: None)
    rows = list(csv.DictReader((tmp_path / "out" / "training_log.csv").open()))
    assert [row["step"] for row in rows] == ["0", "1", "2"]
    assert adapter_info(adapter).block_decoding == BlockDecoding(4)
