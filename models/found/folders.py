"""Folders of GGUF files: LM Studio's models folder (PUBLISHER/REPO/FILE.gguf, at its current and its older
default location, or wherever ~/.lmstudio-home-pointer moves LM Studio's home) and the folders the writer
names in models.folders (any layout).

A file is named by its path under the folder (publisher/repo/FILE.gguf) and may be asked for by the folder
that holds it (publisher/repo) where that holds one model.
"""

from __future__ import annotations

import os
from pathlib import Path

from models.found.files import GGUF_SUFFIX, FoundFile, Skipped, StoreScan, later_split_part

LMSTUDIO = "lmstudio"
FOLDER = "folder"
# PUBLISHER/REPO/FILE.gguf is depth 3; a little more allows a writer's own sub-folders.
MAX_DEPTH = 4
HOME_POINTER = ".lmstudio-home-pointer"


def lmstudio_roots(home: Path) -> list[Path]:
    """LM Studio's models folders: under the home its pointer file names, ~/.lmstudio/models, and the older
    ~/.cache/lm-studio/models."""
    roots = []
    pointer = home / HOME_POINTER
    if pointer.is_file():
        try:
            moved = pointer.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError):
            moved = ""
        if moved:
            roots.append(Path(moved).expanduser() / "models")
    roots += [home / ".lmstudio" / "models", home / ".cache" / "lm-studio" / "models"]
    unique: list[Path] = []
    for root in roots:
        if root not in unique:
            unique.append(root)
    return unique


def configured_folders(setting: str) -> list[Path]:
    """models.folders: folders separated as PATH separates them (":" here, ";" on Windows)."""
    return [Path(part.strip()).expanduser() for part in setting.split(os.pathsep) if part.strip()]


def scan_folder(root: Path, store: str) -> StoreScan:
    scan = StoreScan(store, root, root.is_dir())
    if not scan.exists:
        return scan
    for path in sorted(_gguf_files(root)):
        relative = path.relative_to(root).as_posix()
        why = later_split_part(path.name)
        if why is not None:
            scan.skipped.append(Skipped(store, relative, why))
            continue
        if not path.is_file():
            scan.skipped.append(Skipped(store, relative, "a link to a file that is not there"))
            continue
        parent = path.parent.relative_to(root).as_posix()
        short = parent if parent != "." else path.name.removesuffix(GGUF_SUFFIX)
        scan.files.append(FoundFile(store, relative, path, short))
    return scan


def _gguf_files(root: Path) -> list[Path]:
    found = []
    for folder, subfolders, files in os.walk(root, followlinks=True):
        depth = len(Path(folder).relative_to(root).parts)
        subfolders[:] = [] if depth + 1 >= MAX_DEPTH else [s for s in subfolders if not s.startswith(".")]
        found += [Path(folder) / name for name in files if name.lower().endswith(GGUF_SUFFIX)]
    return found
