"""Instruction -> draft pairs for training Sharpen's own diffusion model, written by the embedded AR model.

Appends one JSON line per pair and flushes it, so a killed run loses at most the line being written;
a second run skips the instructions already answered (a truncated last line is dropped and redone).
Greedy drafts (temperature 0) are written several at a time through one llama.cpp context.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol

from engines.ar_engine import Sampling
from engines.events import Done, GenerationStats
from engines.llama_ar import LlamaAREngine
from training.batched import greedy_batch
from training.data import clean_draft
from training.document_prompts import (
    DOCUMENT_FIRST_ID,
    REWRITE_FIRST_ID,
    document_instructions,
    paragraphs_of,
    rewrite_instructions,
)
from training.open_prompts import FORM_KINDS, FORMS_FIRST_ID, OPEN_FIRST_ID, open_instructions
from training.prompts import instructions


class TeacherPrompt(Protocol):
    """An instruction for the teacher: training.prompts.Instruction or open_prompts.OpenInstruction."""

    @property
    def id(self) -> int: ...

    @property
    def text(self) -> str: ...

    @property
    def teacher_message(self) -> str: ...

    def record(self) -> dict[str, Any]: ...


Draft = tuple[TeacherPrompt, str, int, str]  # instruction, draft, tokens, finish reason
QUOTED_CHARS = 700  # the longest email or paragraph an open instruction quotes
DOCUMENT_CHARS = 1500  # the longest draft a document instruction is cut from
SEED_ID_STRIDE = 1_000_000  # more than any set's count


def instruction_set(name: str, count: int, seed: int, quoted_from: Sequence[Path]) -> list[TeacherPrompt]:
    """The first `count` instructions of a set: "templated" (prompts.py); "open" (open_prompts.py, which
    quotes the teacher's cleaned drafts in `quoted_from` for its reply and rewrite kinds); "forms" (more
    kinds of writing, open_prompts.FORM_KINDS); "document" and "rewrite" (document_prompts.py: drafts into
    those drafts cut as documents, rewrites of their paragraphs)."""
    if name == "templated":
        return list(instructions(count, seed))
    if name == "document":
        documents = quoted_texts(quoted_from, DOCUMENT_CHARS)
        return list(document_instructions(count, documents, seed=seed, first_id=seed_first_id(DOCUMENT_FIRST_ID, seed)))
    if name == "rewrite":
        paragraphs = paragraphs_of(quoted_texts(quoted_from, DOCUMENT_CHARS))
        return list(rewrite_instructions(count, paragraphs, seed=seed, first_id=seed_first_id(REWRITE_FIRST_ID, seed)))
    if name == "forms":
        first_id = seed_first_id(FORMS_FIRST_ID, seed)
        return list(open_instructions(count, quoted=[], seed=seed, first_id=first_id, kinds=FORM_KINDS))
    return list(
        open_instructions(
            count, quoted=quoted_texts(quoted_from), seed=seed, first_id=seed_first_id(OPEN_FIRST_ID, seed)
        )
    )


def seed_first_id(set_first_id: int, seed: int) -> int:
    """Each seed's instructions get ids of their own (seed 0's are the first sets'), so that sets written
    with other seeds train beside them without two pairs sharing an id (held-out is decided by id)."""
    return set_first_id + SEED_ID_STRIDE * seed


def quoted_texts(paths: Sequence[Path], longest: int = QUOTED_CHARS) -> list[str]:
    """Finished drafts of at most `longest` characters, cleaned as training cleans them."""
    texts: list[str] = []
    for path in paths:
        if not path.exists():
            continue
        for line in path.read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            if record.get("finish_reason") != "eos":
                continue
            text = clean_draft(record["draft"], True)
            if 0 < len(text) <= longest:
                texts.append(text)
    return texts


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
    prompts: Sequence[TeacherPrompt],
    *,
    max_tokens: int = 160,
    temperature: float = 0.0,
    parallel: int = 16,
    no_repeat_ngram: int = 0,
    progress: Callable[[int, int, int], None] = lambda _done, _total, _tokens: None,
) -> int:
    """Answer the instructions in `prompts` that `out` lacks; returns how many were written.

    Temperature 0 writes greedy drafts, `parallel` at a time; otherwise one sampled draft at a time.
    `no_repeat_ngram` n > 1: no draft generates a run of n tokens twice (the AR drafts' loop control)."""
    todo = [i for i in prompts if i.id not in answered_ids(out)]
    out.parent.mkdir(parents=True, exist_ok=True)
    if temperature == 0:
        drafts = _greedy(engine, todo, max_tokens, parallel, no_repeat_ngram)
    else:
        drafts = _sampled(engine, todo, max_tokens, Sampling(temperature=temperature, no_repeat_ngram=no_repeat_ngram))
    written = tokens = 0
    with out.open("a", encoding="utf-8") as handle:
        for instruction, draft, draft_tokens, finish_reason in drafts:
            record = {
                **instruction.record(),
                "draft": draft.strip(),
                "draft_tokens": draft_tokens,
                "finish_reason": finish_reason,
                "model": engine.model_name,
                "temperature": temperature,
                "no_repeat_ngram": no_repeat_ngram,
            }
            handle.write(json.dumps(record) + "\n")
            handle.flush()
            written += 1
            tokens += draft_tokens
            progress(written, len(todo), tokens)
    return written


def _sampled(engine: LlamaAREngine, todo: list[TeacherPrompt], max_tokens: int, sampling: Sampling) -> Iterator[Draft]:
    for instruction in todo:
        done = next(
            e
            for e in engine.chat(instruction.teacher_message, max_tokens=max_tokens, sampling=sampling)
            if isinstance(e, Done)
        )
        assert isinstance(done.stats, GenerationStats)
        yield instruction, done.text, done.stats.generated_tokens, done.stats.finish_reason


def _greedy(
    engine: LlamaAREngine, todo: list[TeacherPrompt], max_tokens: int, parallel: int, no_repeat_ngram: int
) -> Iterator[Draft]:
    prompts = [engine.chat_prompt(instruction.teacher_message, max_tokens) for instruction in todo]
    for reply in greedy_batch(engine, prompts, max_tokens, parallel=parallel, no_repeat_ngram=no_repeat_ngram):
        yield todo[reply.index], engine.detokenize(reply.tokens), len(reply.tokens), reply.finish_reason
