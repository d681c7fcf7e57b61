"""Every store Sharpen looks in, what each holds, and which found model a name means.

Listing the stores reads directories and Ollama's small manifests only; a file's header is read when its
details are asked for (`models list`, F2, doctor), once per version of the file (its size and mtime).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from models.errors import ModelError, ModelFileError
from models.found.files import FoundFile, Skipped, StoreScan
from models.found.folders import FOLDER, LMSTUDIO, configured_folders, lmstudio_roots, scan_folder
from models.found.hf_cache import scan_hf_cache
from models.found.ollama import ollama_roots, scan_ollama
from models.found.runnable import Verdict, verdict
from models.gguf_header import read_gguf_header
from models.gguf_info import GGUFInfo, info_from_header

STORE_LABELS = {"ollama": "Ollama", LMSTUDIO: "LM Studio", FOLDER: "models.folders", "hf": "HF cache"}


class AmbiguousModelName(ModelError):
    def __init__(self, name: str, matches: list[FoundFile]) -> None:
        self.matches = matches
        listed = ", ".join(f"{m.name} ({STORE_LABELS[m.store]})" for m in matches)
        super().__init__(f"{name!r} matches {len(matches)} found models: {listed}; use one of these names")


@dataclass(frozen=True)
class FoundModel:
    """A found GGUF as its header describes it, and whether Sharpen can run it."""

    file: FoundFile
    info: GGUFInfo
    verdict: Verdict

    @property
    def name(self) -> str:
        return self.file.name

    @property
    def store_label(self) -> str:
        return STORE_LABELS[self.file.store]

    def as_json(self) -> dict[str, object]:
        info = self.info
        return {
            "name": self.name,
            "store": self.file.store,
            "path": str(self.file.path),
            "architecture": info.architecture,
            "size_bytes": info.file_size,
            "quantization": info.file_type,
            "context_length": info.context_length,
            "runs_as": self.verdict.runs_as,
            "reason": self.verdict.reason,
        }


@dataclass(frozen=True)
class StoreContents:
    """One store as listed: its scan, the models read from it and what was skipped there."""

    scan: StoreScan
    models: list[FoundModel]
    skipped: list[Skipped]


def scan_stores(home: Path, hf_cache: Path, folders: str, env: Mapping[str, str] = os.environ) -> list[StoreScan]:
    """Every store's scan: Ollama's, LM Studio's folders, models.folders and the HF cache (names only)."""
    scans = [scan_ollama(root) for root in ollama_roots(home, env)]
    scans += [scan_folder(root, LMSTUDIO) for root in lmstudio_roots(home)]
    scans += [scan_folder(root, FOLDER) for root in configured_folders(folders)]
    scans.append(scan_hf_cache(hf_cache))
    return scans


@dataclass(frozen=True)
class FoundIndex:
    scans: list[StoreScan]

    @functools.cached_property
    def files(self) -> list[FoundFile]:
        """Every found file once: a file two stores share, or a name two folders give (LM Studio's current and
        older folder), is listed from the first."""
        seen: set[Path | str] = set()
        unique = []
        for scan in self.scans:
            for found in scan.files:
                path = found.path.absolute()
                if path not in seen and found.name not in seen:
                    seen |= {path, found.name}
                    unique.append(found)
        return unique

    def named(self, name: str) -> list[FoundFile]:
        """The files `name` means: those of that name, else those it names for short (publisher/repo)."""
        exact = [f for f in self.files if f.name == name]
        return exact or [f for f in self.files if f.short_name == name]

    def one(self, name: str) -> FoundFile | None:
        """The file `name` means; None if none; AmbiguousModelName if several. A short name that several files
        answer to means the one Sharpen can run, where only one can (a vision model's folder also holds its
        projector, which LM Studio downloads beside it)."""
        matches = self.named(name)
        if len(matches) > 1:
            runnable = [m for m in matches if _runnable(m)]
            if len(runnable) == 1:
                return runnable[0]
            raise AmbiguousModelName(name, matches)
        return matches[0] if matches else None


def _runnable(found: FoundFile) -> bool:
    examined = examine(found)
    return isinstance(examined, FoundModel) and examined.verdict.runs_as is not None


def examine(found: FoundFile) -> FoundModel | Skipped:
    """The file's header read (once per version of the file) into a FoundModel, or why it is skipped."""
    try:
        stat = found.path.stat()
        info, metadata_verdict = _read(found.path, stat.st_size, stat.st_mtime_ns)
    except ModelFileError as error:
        return Skipped(found.store, found.name, error.problem)
    except OSError as error:
        return Skipped(found.store, found.name, f"cannot be read ({error.strerror or error})")
    except (ValueError, KeyError) as error:  # a header whose values the format does not allow
        return Skipped(found.store, found.name, f"has a header that cannot be read ({error})")
    return FoundModel(found, info, metadata_verdict)


@functools.lru_cache(maxsize=512)
def _read(path: Path, size: int, mtime_ns: int) -> tuple[GGUFInfo, Verdict]:
    header = read_gguf_header(path)
    info = info_from_header(header)
    return info, verdict(info, header.metadata)
