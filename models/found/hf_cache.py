"""GGUF files in the Hugging Face cache: models--OWNER--REPO/snapshots/<commit>/..., each file a link into
blobs/. The snapshot refs/main names is read where there is one, else every snapshot (a file in several: the
newest). A file is named OWNER/REPO/PATH and may be asked for as OWNER/REPO where the repo holds one model."""

from __future__ import annotations

from pathlib import Path

from models.found.files import GGUF_SUFFIX, FoundFile, Skipped, StoreScan, later_split_part

STORE = "hf"
REPO_PREFIX = "models--"


def scan_hf_cache(cache_dir: Path) -> StoreScan:
    scan = StoreScan(STORE, cache_dir, cache_dir.is_dir())
    if not scan.exists:
        return scan
    for repo_folder in sorted(cache_dir.glob(f"{REPO_PREFIX}*")):
        repo = repo_folder.name.removeprefix(REPO_PREFIX).replace("--", "/")
        for relative, path in sorted(_repo_ggufs(repo_folder).items()):
            name = f"{repo}/{relative}"
            why = later_split_part(path.name)
            if why is None and not path.is_file():
                why = "its blob is missing (an interrupted download?)"
            if why is not None:
                scan.skipped.append(Skipped(STORE, name, why))
                continue
            scan.files.append(FoundFile(STORE, name, path, repo))
    return scan


def _repo_ggufs(repo_folder: Path) -> dict[str, Path]:
    """Relative path in the repo -> the file, from the main snapshot, else the newest that has it."""
    snapshots = repo_folder / "snapshots"
    main = repo_folder / "refs" / "main"
    folders: list[Path] = []
    if main.is_file():
        try:
            folders = [snapshots / main.read_text(encoding="utf-8").strip()]
        except (OSError, UnicodeDecodeError):
            folders = []
    if not folders or not folders[0].is_dir():
        folders = sorted((f for f in snapshots.glob("*") if f.is_dir()), key=lambda f: f.stat().st_mtime)
    files: dict[str, Path] = {}
    for folder in folders:  # oldest first: a newer snapshot's file replaces an older one's
        for path in folder.rglob(f"*{GGUF_SUFFIX}"):
            files[path.relative_to(folder).as_posix()] = path
    return files
