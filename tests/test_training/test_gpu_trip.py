"""The drafter's GPU training trip within what a device call carries: the base goes in parts, one a call,
joined on the machine only when whole; the run there chooses its adapter by the unseen pairs and brings it
back in parts. The GPU machine itself cannot run here: the last test runs its script end to end on the CPU
(`--device cpu`) with the tiny llama as the base, every call simulated by copying that call's folder."""

from __future__ import annotations

import csv
import os
import random
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from training.gpu_payload import (
    MARGIN,
    RETURN_FILE_BYTES,
    MissingParts,
    arrive,
    join,
    pick,
    prepare,
    split,
    travelling_bytes,
)

REPO = Path(__file__).resolve().parents[2]
MiB = 1 << 20


def random_file(path: Path, size: int, seed: int = 0) -> Path:
    path.write_bytes(random.Random(seed).randbytes(size))
    return path


def git_repo(path: Path, tracked_bytes: int) -> Path:
    path.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=path, check=True)
    random_file(path / "tracked.bin", tracked_bytes, seed=1)
    subprocess.run(["git", "add", "tracked.bin"], cwd=path, check=True)
    (path / ".git" / "info").mkdir(exist_ok=True)
    (path / ".git" / "info" / "exclude").write_text("/.device-train/\n")
    return path


def test_a_file_is_joined_from_its_parts_only_when_every_part_is_whole(tmp_path: Path) -> None:
    original = random_file(tmp_path / "model.gguf", 5 * MiB + 123)
    manifest = split(original, tmp_path / "parts", 2 * MiB, first_part_bytes=MiB)
    parts = sorted((tmp_path / "parts").glob("model.gguf.part-*"))
    assert [p.stat().st_size for p in parts] == [MiB, 2 * MiB, 2 * MiB, 123]
    joined = join(manifest, tmp_path / "joined.gguf")
    assert joined.read_bytes() == original.read_bytes()

    damaged = bytearray(parts[1].read_bytes())
    damaged[7] ^= 1
    parts[1].write_bytes(bytes(damaged))
    parts[3].unlink()
    with pytest.raises(MissingParts) as missing:
        join(manifest, tmp_path / "again.gguf")
    assert missing.value.missing == ["model.gguf.part-02", "model.gguf.part-04"]
    assert not (tmp_path / "again.gguf").exists() and not (tmp_path / "again.gguf.partial").exists()


def test_each_call_fits_beside_the_tree_and_the_base_is_whole_after_the_last(tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo", 3 * MiB)
    base = random_file(tmp_path / "base.gguf", 9 * MiB, seed=2)
    examples = random_file(tmp_path / "examples.pt", MiB // 2, seed=3)
    call_bytes = 8 * MiB
    calls = prepare(repo, base, [examples], repo / ".device-train", call_bytes=call_bytes)
    tree = travelling_bytes(repo)
    assert tree == 3 * MiB  # the prepared folder is ignored, so it does not travel with every call
    sizes = [sum(p.stat().st_size for p in call.iterdir()) for call in calls]
    assert all(tree + size <= call_bytes for size in sizes)
    assert len(calls) == 3 and (calls[0] / "examples.pt").is_file()

    machine = tmp_path / "machine"
    for number, call in enumerate(calls, start=1):
        lines, complete = arrive(call, machine)
        assert complete == (number == len(calls))
        if not complete:
            assert lines == ["still to carry, one call each: " + ", ".join(c.name for c in calls[number:])]
    assert lines == ["base.gguf: joined from 3 parts"]
    assert (machine / "base.gguf").read_bytes() == base.read_bytes()
    assert (machine / "examples.pt").read_bytes() == examples.read_bytes()
    assert arrive(calls[-1], machine) == (["base.gguf: here"], True)

    # A machine that went back between calls: any call's trip names what the new one lacks, and a part that
    # arrived damaged is replaced when its call is carried again.
    fresh = tmp_path / "fresh"
    assert arrive(calls[1], fresh) == (["still to carry, one call each: call-01, call-03"], False)
    arrive(calls[0], fresh)
    damaged = bytearray((fresh / "base.gguf.part-01").read_bytes())
    damaged[0] ^= 1
    (fresh / "base.gguf.part-01").write_bytes(bytes(damaged))
    assert arrive(calls[2], fresh) == (["still to carry, one call each: call-01"], False)
    assert arrive(calls[0], fresh) == (["base.gguf: joined from 3 parts"], True)

    (repo / "notes.txt").write_text("an untracked file travels too")
    with pytest.raises(ValueError, match="not ignored"):
        prepare(repo, base, [], repo / "elsewhere", call_bytes=call_bytes)
    with pytest.raises(ValueError, match="no room"):
        prepare(repo, base, [examples], repo / ".device-train", call_bytes=tree + 2 * MiB)


def test_the_best_adapter_comes_back_within_what_a_call_brings_back(tmp_path: Path) -> None:
    runs = [tmp_path / name for name in ("whole-half", "whole-all", "blocks-8-4-16")]
    for number, run in enumerate(runs):  # the second run has the highest unseen share; the third no adapter
        run.mkdir()
        (run / "training_log.csv").write_text(
            f"step,heldout_loss,unseen_one_pass_accuracy\n0,1.6,0.25\n100,1.5,0.2{6 + number % 2}\n200,1.4,0.25\n"
        )
    adapter = random_file(runs[1] / "best-sharpen-draft-lora.gguf", 19_567_040, seed=4)  # the shipped size
    random_file(runs[0] / "best-sharpen-draft-lora.gguf", 1000, seed=5)
    back = tmp_path / "back"
    lines = pick(runs, back)
    assert lines == [
        "whole-half: best at step 100, unseen one-pass 26.0%, held-out 1.500",
        "whole-all: best at step 100, unseen one-pass 27.0%, held-out 1.500",
        "blocks-8-4-16: no adapter better than its start",
        "brought back: whole-all's best-sharpen-draft-lora.gguf",
    ]
    files = list(back.iterdir())
    assert len(files) <= 8 and sum(f.stat().st_size for f in files) <= 64 * MiB
    assert all(f.stat().st_size <= RETURN_FILE_BYTES for f in files)
    joined = join(back / "best-sharpen-draft-lora.gguf.manifest.json", tmp_path / "out-gpu" / "adapter.gguf")
    assert joined.read_bytes() == adapter.read_bytes()

    random_file(runs[1] / "best-sharpen-draft-lora.gguf", 5 * RETURN_FILE_BYTES, seed=6)  # a far larger rank
    with pytest.raises(ValueError, match="at most 8"):
        pick(runs, tmp_path / "too-much")


def test_the_gpu_script_trains_chooses_by_the_unseen_pairs_and_brings_the_adapter_back(
    tiny_llama_path: Path, tmp_path: Path
) -> None:
    pytest.importorskip("torch", reason="training the drafter needs the torch extra")
    from lora_support import random_lora, tiny_plan, write_pairs

    from models.adapted import BlockDecoding, adapter_info, write_adapter
    from training.adapt.examples import encode_data, write_examples
    from training.adapt.lora import base_model
    from training.adapt.run import run

    pairs = write_pairs(tmp_path / "pairs.jsonl")
    unseen = tmp_path / "unseen.jsonl"
    unseen.write_text("\n".join(pairs.read_text().splitlines()[:3]) + "\n")
    examples = write_examples(encode_data((pairs,), tiny_llama_path, 200, unseen), tmp_path / "examples.pt")
    start = write_adapter(
        tmp_path / "start.gguf", tiny_llama_path, random_lora(base_model(tiny_llama_path), 2), alpha=2.0, name="start"
    )

    # The run chooses its best adapter by the unseen pairs' one-pass accuracy, logged beside the held-out loss.
    plan = tiny_plan(
        tiny_llama_path, tmp_path, data=(), examples=examples, max_steps=4, peak_lr=1e-2, warmup=1, init_from=start
    )
    run(plan, log=lambda _line: None)
    rows = list(csv.DictReader((tmp_path / "out" / "training_log.csv").open()))
    scores = [float(row["unseen_one_pass_accuracy"]) for row in rows]
    assert all(0 <= score <= 1 for score in scores)
    ranks = [(-score, float(row["heldout_loss"])) for score, row in zip(scores, rows, strict=True)]  # ties: the loss
    assert (tmp_path / "out" / "best-sharpen-draft-lora.gguf").exists() == (min(ranks[1:]) < ranks[0])
    run(replace(plan, out=tmp_path / "no-unseen", unseen=None, examples=None, data=(pairs,)), log=lambda _line: None)
    rows = list(csv.DictReader((tmp_path / "no-unseen" / "training_log.csv").open()))
    assert all(row["unseen_one_pass_accuracy"] == "nan" for row in rows)

    # The device script, every call simulated: the call's folder copied where the carried path lands.
    repo = git_repo(tmp_path / "repo", 1000)
    room = travelling_bytes(repo) + MARGIN + 16 * MiB  # the tiny base (26 MiB) in two calls
    calls = prepare(repo, tiny_llama_path, [examples], repo / ".device-train", call_bytes=room)
    assert len(calls) == 2
    carried, back = tmp_path / "carried", tmp_path / "back"
    environment = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "SHARPEN_CARRIED": str(carried),
        "SHARPEN_PAYLOAD": str(tmp_path / "payload"),
        "SHARPEN_RUNS": str(tmp_path / "runs"),
        "OUT": str(back),
    }
    flags = [
        "--device",
        "cpu",
        "--steps",
        "4",
        "--eval-every",
        "1",
        "--batch",
        "4",
        "--rank",
        "2",
        "--peak-lr",
        "1e-2",
        "--init-from",
        str(start),
    ]
    outputs = []
    for call in calls:
        shutil.rmtree(carried, ignore_errors=True)
        shutil.copytree(call, carried)
        result = subprocess.run(
            ["bash", str(REPO / "scripts" / "train-drafter-gpu"), "1", *flags],
            env=environment,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert result.returncode == 0, result.stdout + result.stderr
        outputs.append(result.stdout)
    assert outputs[0] == "still to carry, one call each: call-02\n"
    assert "joined from 2 parts" in outputs[1]
    assert {p.name for p in back.iterdir()} >= {"blocks-8-4-16.csv", "whole-half.csv", "whole-all.csv", "summary.txt"}
    (manifest,) = back.glob("*.manifest.json")  # trained on the unseen pairs themselves, a variant beats its start
    adapter = join(manifest, tmp_path / "sharpen-draft-lora.gguf")
    assert adapter_info(adapter).block_decoding == BlockDecoding(8)
