"""Instruction -> draft pairs for training Sharpen's own diffusion model, written by the embedded AR model.

Appends one JSON line per pair and flushes it, so a killed run loses at most the line being written;
a second run skips the instructions already answered (a truncated last line is dropped and redone).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from engines.events import Done, GenerationStats
from engines.llama_ar import LlamaAREngine
from models.training.prompts import instructions


def answered_ids(path: Path) -> set[int]:
    if not path.exists():
        return set()
    done: set[int] = set()
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    kept: list[str] = []
    for line in lines:
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line cut off by a killed run
        if line.endswith("\n"):
            done.add(int(record["id"]))
            kept.append(line)
    if len(kept) != len(lines):
        path.write_text("".join(kept), encoding="utf-8")
    return done


def make_pairs(
    engine: LlamaAREngine,
    out: Path,
    count: int,
    *,
    seed: int = 0,
    max_tokens: int = 200,
    temperature: float = 0.8,
    progress: Callable[[int, int, int], None] = lambda _done, _total, _tokens: None,
) -> int:
    """Answer the first `count` instructions of `seed` that `out` lacks; returns how many were written."""
    todo = [i for i in instructions(count, seed) if i.id not in answered_ids(out)]
    out.parent.mkdir(parents=True, exist_ok=True)
    written = tokens = 0
    with out.open("a", encoding="utf-8") as handle:
        for instruction in todo:
            done = next(
                e
                for e in engine.chat(instruction.text, max_tokens=max_tokens, temperature=temperature)
                if isinstance(e, Done)
            )
            assert isinstance(done.stats, GenerationStats)
            record = {
                **instruction.record(),
                "draft": done.text.strip(),
                "draft_tokens": done.stats.generated_tokens,
                "finish_reason": done.stats.finish_reason,
                "model": engine.model_name,
                "temperature": temperature,
            }
            handle.write(json.dumps(record) + "\n")
            handle.flush()
            written += 1
            tokens += done.stats.generated_tokens
            progress(written, len(todo), tokens)
    return written
