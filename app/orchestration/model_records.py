"""What the model manager answers with: the file a model is served from, the model serving a role, a
catalogue entry as this machine has it, a model pulled ready for llama.cpp."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from models.catalogue import CatalogueEntry
from models.fit import FitVerdict
from models.hub import PullResult


@dataclass(frozen=True)
class ServedFile:
    """The file a model is served from, and (a diffusion GGUF) whether a cache can run on it and why not."""

    path: Path
    cached: bool
    note: str
    # A LoRA adapter llama.cpp applies to `path` at load (Sharpen's adapters, models/adapted.py).
    adapter: Path | None = None


@dataclass(frozen=True)
class Serving:
    """The model that serves a role now: the configured one, or (its file gone) the embedded one, and why."""

    configured: str
    name: str
    note: str = ""


# What each role's model does, for the line that says another model stands in for it.
ROLE_WORK = {"complete": "completions", "write": "AR drafts, rewrites and chat", "draft": "drafts"}


def size_on_disk(path: Path) -> int:
    if path.is_dir():
        return sum(p.resolve().stat().st_size for p in path.rglob("*") if p.is_file())
    return path.stat().st_size


@dataclass(frozen=True)
class GGUFPull:
    """A block-causal model pulled ready for llama.cpp: its GGUF, the download (None: the GGUF was there and
    nothing was fetched), whether the GGUF was written now, and the bytes freed by dropping the safetensors."""

    gguf: Path
    download: PullResult | None
    converted: bool
    dropped_bytes: int


@dataclass(frozen=True)
class ModelStatus:
    """A catalogue entry as this machine has it: where it is, its size, what it serves, whether it fits."""

    entry: CatalogueEntry
    path: Path | None
    size_bytes: int | None
    in_use_for: tuple[str, ...]
    fit: FitVerdict

    @property
    def name(self) -> str:
        return self.entry.name

    @property
    def present(self) -> bool:
        return self.size_bytes is not None or self.entry.is_remote

    @property
    def runs_on(self) -> str:
        """torch for a checkpoint folder (or a torch entry not present), else llama.cpp (a GGUF, or its server)."""
        if self.path is not None and self.present:
            return "torch" if self.path.is_dir() else "llama.cpp"
        return "torch" if self.entry.engine.startswith("torch") else "llama.cpp"

    @property
    def engine(self) -> str:
        """The entry's engine, or llama-diffusion for a torch entry whose GGUF was written."""
        converted = self.entry.engine == "torch-diffusion" and self.runs_on == "llama.cpp"
        return "llama-diffusion" if converted else self.entry.engine

    @property
    def size_label(self) -> str:
        if self.size_bytes:
            return f"{self.size_bytes / 1e6:,.0f} MB"
        if self.entry.is_remote:
            return "remote"
        if self.entry.is_hub:
            return f"get {self.entry.size_bytes / 1e9:.1f} GB" if self.entry.size_bytes else "not pulled"
        return "missing"

    def as_json(self) -> dict[str, Any]:
        entry = self.entry
        return {
            "name": entry.name,
            "role": entry.role,
            "engine": self.engine,
            "runs_on": self.runs_on,
            "description": entry.description,
            "path": str(self.path) if self.path else None,
            "present": self.present,
            "size_bytes": self.size_bytes,
            "in_use_for": list(self.in_use_for),
            "source": entry.source,
            "download_bytes": entry.size_bytes,
            "fit": self.fit.reason,
            "fits": self.fit.fits,
        }
