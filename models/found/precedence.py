"""Which model a name means, declared once: an existing path first, then a catalogue name, then the name of a
model found in another tool's store (Ollama's name:tag, LM Studio's publisher/repo, an HF repo).

A name found in no store resolves as before: a path that is not there yet, or an unknown name (UnknownModel).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

from models.catalogue import CatalogueEntry, ResolvedModel, looks_like_path, resolve_model
from models.found.stores import FoundIndex

NAME_PRECEDENCE = ("an existing path", "a catalogue name", "a found model's name")


def resolve_name(name: str, entries: Mapping[str, CatalogueEntry], found: Callable[[], FoundIndex]) -> ResolvedModel:
    """`name` as a model on disk, by NAME_PRECEDENCE. `found` is asked only when the first two miss; a name
    several found models answer to raises AmbiguousModelName."""
    path = Path(name).expanduser()
    if looks_like_path(name) and path.exists():
        return ResolvedModel(name=path.name, path=path, entry=None)
    if name in entries:
        return resolve_model(name, entries)
    match = found().one(name)
    if match is not None:
        return ResolvedModel(name=match.name, path=match.path, entry=None, found=match)
    return resolve_model(name, entries)


def written_as_found_name(name: str) -> bool:
    """Whether `name` is written as a found model's name (name:tag, publisher/repo, owner/repo/FILE.gguf), not
    as a path (absolute, or from ~ or .) nor a catalogue name: a configured model of such a name whose file
    vanishes has the embedded model stand in (a path or a catalogue name that is missing is an error, as it was)."""
    return (":" in name or "/" in name) and not name.startswith(("/", "~", ".")) and not Path(name).is_absolute()
