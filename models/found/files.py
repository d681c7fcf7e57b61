"""What a store scan finds: model files under the names their store gives them, and what it passed over."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

GGUF_SUFFIX = ".gguf"


@dataclass(frozen=True)
class FoundFile:
    """A GGUF in another tool's store. `name` is unique within its store (Ollama's name:tag, or
    publisher/repo/FILE.gguf); `short_name` is what a writer may type instead where only one file has it
    (publisher/repo, or an Ollama model's name without ":latest")."""

    store: str
    name: str
    path: Path
    short_name: str = ""


@dataclass(frozen=True)
class Skipped:
    """Something in a store that is no model Sharpen lists, and why."""

    store: str
    where: str
    why: str


@dataclass(frozen=True)
class StoreScan:
    """One store's location and what was found and skipped there; `exists` False: nothing at that location."""

    store: str
    root: Path
    exists: bool
    files: list[FoundFile] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)


def split_part(filename: str) -> tuple[int, int] | None:
    """(part, of) for a split GGUF's file name (`NAME-00002-of-00003.gguf`), else None."""
    stem = filename.removesuffix(GGUF_SUFFIX)
    pieces = stem.rsplit("-", 3)
    if len(pieces) == 4 and pieces[2] == "of" and pieces[1].isdigit() and pieces[3].isdigit():
        return int(pieces[1]), int(pieces[3])
    return None


def later_split_part(filename: str) -> str | None:
    """Why a file is skipped as a later part of a split GGUF (llama.cpp opens the first part), else None."""
    part = split_part(filename)
    if part is None or part[0] == 1:
        return None
    return f"part {part[0]} of {part[1]} of a split model: it is listed under its first part"


def readable_json(path: Path) -> Any:
    """A small JSON file's contents, or None where it cannot be read or parsed."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
