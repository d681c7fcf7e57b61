"""Downloads from the Hugging Face Hub into the standard HF cache, with progress, resume and checks.

Everything goes through huggingface_hub's own client (hf_hub_download), so files land where every other
HF tool finds them, a dropped connection is retried from where it stopped within one pull, and HF_ENDPOINT,
HF_HOME, HF_HUB_CACHE and HF_HUB_OFFLINE are honoured. The environment is read at each call, not at import.

An interrupted pull resumes where it stopped: huggingface_hub (2.4 on) deletes the partial file of a download
that fails, so a file served over plain HTTP is first fetched by huggingface_hub's own http_get into
`blobs/<etag>.sharpen-partial`, which outlives an interruption and is resumed by a Range request, and moved
into place when whole; hf_hub_download then finds the blob and links it into the snapshot. A file served
through Xet is left to hf_hub_download (and Xet's own transfer).

After a download every file is checked against its content hash: the catalogue's sha256 where it
gives one, else the hash the Hub stores the file under (an LFS sha256, or a git blob id). A file that
does not match is removed from the cache and the pull fails, so a corrupt file is never used.
"""

from __future__ import annotations

import fnmatch
import hashlib
import importlib
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from models.errors import ModelError
from models.file_lock import locked

SHA256 = re.compile(r"^[0-9a-f]{64}$")
SHA1 = re.compile(r"^[0-9a-f]{40}$")
DEFAULT_ENDPOINT = "https://huggingface.co"
PARTIAL_SUFFIX = ".sharpen-partial"
# What a checkpoint folder needs: config, weights, tokenizer. Never remote code (*.py) or pickles (*.bin).
CHECKPOINT_PATTERNS = ("*.json", "*.safetensors", "*.txt", "*.model", "*.tiktoken", "*.jinja")


class PullError(ModelError):
    """A download could not be done; the message says why and what to do."""


class IntegrityError(PullError):
    pass


@dataclass(frozen=True)
class HubModel:
    """A model on the Hub: a repository at a revision, and one file of it (None: the whole checkpoint), with
    the sha256 that file is checked against ("" to check it against the hash the Hub stores it under)."""

    name: str
    repo: str
    file: str | None
    revision: str = "main"
    sha256: str = ""


@dataclass(frozen=True)
class HubSettings:
    endpoint: str
    cache_dir: Path
    offline: bool

    @classmethod
    def from_environment(cls, *, offline: bool = False) -> HubSettings:
        env = os.environ
        home = Path(env.get("HF_HOME") or Path.home() / ".cache" / "huggingface").expanduser()
        cache = Path(env.get("HF_HUB_CACHE") or env.get("HUGGINGFACE_HUB_CACHE") or home / "hub").expanduser()
        env_offline = env.get("HF_HUB_OFFLINE", "").strip().lower() in {"1", "true", "yes", "on"}
        endpoint = (env.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")
        return cls(endpoint=endpoint, cache_dir=cache, offline=offline or env_offline)


@dataclass(frozen=True)
class PullProgress:
    model: str
    file: str
    file_index: int  # 1-based
    file_count: int
    done_bytes: int
    total_bytes: int | None
    # The whole pull so far (the files before this one, whether fetched now or found in the cache, and this
    # one's bytes), and in all where the Hub gave every file's size (else None).
    pull_done_bytes: int = 0
    pull_total_bytes: int | None = None


@dataclass(frozen=True)
class PullResult:
    path: Path
    downloaded_files: int  # 0: everything was in the cache already
    bytes_on_disk: int
    verified_files: int


ProgressCallback = Callable[[PullProgress], None]
# Told the bytes a pull still has to download before it downloads any (None: the Hub did not say); it raises
# to stop the pull (not enough disk).
RoomCheck = Callable[[int | None], None]


@dataclass(frozen=True)
class _PullPlace:
    """Where one file sits in a pull: its name, its place, the bytes of the files before it, the bytes in all."""

    model: str
    file: str
    index: int  # 1-based
    count: int
    before: int
    all_bytes: int | None


def _progress_class(callback: ProgressCallback, place: _PullPlace) -> type:
    from tqdm.auto import tqdm

    def event(done: int, total: int | None) -> PullProgress:
        all_bytes = place.all_bytes if place.all_bytes is not None else (total if place.count == 1 else None)
        return PullProgress(
            place.model, place.file, place.index, place.count, done, total, place.before + done, all_bytes
        )

    class Progress(tqdm):
        """huggingface_hub's byte counter, turned into PullProgress events (and no terminal output)."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs["disable"] = True
            self._sharpen_total = kwargs.get("total")
            self._sharpen_done = int(kwargs.get("initial") or 0)
            super().__init__(*args, **kwargs)
            callback(event(self._sharpen_done, self._sharpen_total))

        def update(self, n: float | None = 1) -> bool | None:
            self._sharpen_done += int(n or 0)
            callback(event(self._sharpen_done, self._sharpen_total))
            return super().update(n)

    return Progress


# ----- the cache ---------------------------------------------------------------------------------


def cached_path(model: HubModel, settings: HubSettings | None = None) -> Path | None:
    """Where a Hub model sits in the cache, or None if it was never pulled completely. No network."""
    from huggingface_hub import try_to_load_from_cache

    settings = settings or HubSettings.from_environment()
    file = model.file
    if file is not None:
        found = try_to_load_from_cache(model.repo, file, cache_dir=settings.cache_dir, revision=model.revision)
        return Path(found) if isinstance(found, str) else None
    snapshot = _snapshot_folder(model, settings)
    return snapshot if snapshot is not None and (snapshot / "config.json").is_file() else None


def _snapshot_folder(model: HubModel, settings: HubSettings) -> Path | None:
    repo_folder = settings.cache_dir / ("models--" + model.repo.replace("/", "--"))
    ref = repo_folder / "refs" / model.revision
    commit = ref.read_text().strip() if ref.is_file() else model.revision
    folder = repo_folder / "snapshots" / commit
    return folder if folder.is_dir() else None


def git_blob_id(path: Path) -> str:
    digest = hashlib.sha1(f"blob {path.stat().st_size}\0".encode())
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 22), b""):
            digest.update(chunk)
    return digest.hexdigest()


def verify_file(snapshot_file: Path, expected_sha256: str = "") -> None:
    """Check a file in the cache against its hash; remove it and raise IntegrityError if it does not match.

    The cache stores each file as blobs/<etag>, and the Hub's etag is the file's sha256 (LFS files)
    or its git blob id (small files), so the expected hash is known even offline.
    """
    blob = snapshot_file.resolve()
    etag = blob.name
    if expected_sha256 or SHA256.match(etag):
        expected, actual, kind = expected_sha256 or etag, sha256_of(blob), "sha256"
    elif SHA1.match(etag):
        expected, actual, kind = etag, git_blob_id(blob), "git blob id"
    else:
        return  # a server that gives no content hash: nothing to check against
    if actual != expected:
        _remove_cached(snapshot_file)
        raise IntegrityError(
            f"{snapshot_file.name}: the downloaded file's {kind} is {actual}, expected {expected}: it is corrupt "
            "and was removed from the cache. Pull it again; if it keeps failing, the mirror serves a bad file."
        )


def _remove_cached(snapshot_file: Path) -> int:
    """Delete a snapshot entry and its blob (unless another snapshot still points to it). Returns bytes freed."""
    blob = snapshot_file.resolve()
    if snapshot_file.is_symlink():
        snapshot_file.unlink()
    if not blob.exists():
        return 0
    snapshots = blob.parent.parent / "snapshots"
    still_linked = snapshots.is_dir() and any(
        link.is_symlink() and link.resolve() == blob for link in snapshots.rglob("*")
    )
    if blob != snapshot_file and still_linked:
        return 0
    freed = blob.stat().st_size
    blob.unlink()
    return freed


# ----- pulling -----------------------------------------------------------------------------------


def _translate(error: Exception, model: HubModel, settings: HubSettings, file: str | None) -> PullError:
    from huggingface_hub.errors import (
        EntryNotFoundError,
        GatedRepoError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    where = f"{model.repo}" + (f"/{file}" if file else "")
    if isinstance(error, GatedRepoError):
        return PullError(
            f"{where} is gated on {settings.endpoint}: accept its terms there and log in (`hf auth login`)"
        )
    if isinstance(error, RepositoryNotFoundError):
        return PullError(
            f"repository {model.repo} was not found on {settings.endpoint} (or it is private); "
            "check the catalogue entry's source"
        )
    if isinstance(error, RevisionNotFoundError):
        return PullError(f"revision {model.revision!r} of {model.repo} was not found on {settings.endpoint}")
    if isinstance(error, LocalEntryNotFoundError):
        if settings.offline:
            return PullError(
                f"{where} is not in the Hugging Face cache ({settings.cache_dir}) and offline mode is on "
                "(--offline or HF_HUB_OFFLINE); pull it once while online"
            )
        return PullError(
            f"cannot reach {settings.endpoint} to download {where}, and it is not in the cache "
            f"({settings.cache_dir}); check the network (or HF_ENDPOINT), then pull again"
        )
    if isinstance(error, EntryNotFoundError):
        return PullError(f"{where} does not exist in {model.repo} at revision {model.revision!r}")
    detail = "; ".join(line.strip() for line in str(error).splitlines() if line.strip())  # the Hub's run over lines
    return PullError(f"downloading {where} from {settings.endpoint} failed: {type(error).__name__}: {detail}")


def _checkpoint_files(model: HubModel, settings: HubSettings) -> tuple[str, dict[str, int | None]]:
    """(commit, files to fetch with their sizes where the Hub gives them) for a whole checkpoint."""
    from huggingface_hub import HfApi

    api = HfApi(endpoint=settings.endpoint)
    info = api.model_info(model.repo, revision=model.revision, files_metadata=True)
    sizes = {s.rfilename: s.size for s in info.siblings or []}
    wanted = [n for n in sizes if any(fnmatch.fnmatch(n.rsplit("/", 1)[-1], p) for p in CHECKPOINT_PATTERNS)]
    if not any(n.endswith(".safetensors") for n in wanted):
        raise PullError(f"{model.repo} has no safetensors weights; Sharpen loads no pickled (.bin) checkpoints")
    return str(info.sha), {name: sizes[name] for name in sorted(wanted)}


def pull(
    model: HubModel,
    *,
    settings: HubSettings | None = None,
    progress: ProgressCallback | None = None,
    require_room: RoomCheck | None = None,
) -> PullResult:
    """Download a Hub model into the HF cache (or find it there) and verify it. Returns its path."""
    from huggingface_hub import hf_hub_download, try_to_load_from_cache

    settings = settings or HubSettings.from_environment()
    callback = progress or (lambda _event: None)
    sizes: dict[str, int | None]
    if model.file is not None:
        revision, sizes = model.revision, {model.file: None}
    elif settings.offline:
        folder = cached_path(model, settings)
        if folder is None:
            raise _translate(_local_missing(), model, settings, None)
        return _verified_result(model, folder, [p.name for p in folder.iterdir()], 0)
    else:
        try:
            revision, sizes = _checkpoint_files(model, settings)
        except PullError:
            raise
        except Exception as error:  # huggingface_hub and httpx raise many kinds
            cached = cached_path(model, settings)
            if cached is not None and _is_connection_problem(error):
                return _verified_result(model, cached, [p.name for p in cached.iterdir()], 0)
            raise _translate(error, model, settings, None) from error
    if require_room is not None and not settings.offline:
        require_room(_bytes_to_fetch(model, revision, sizes, settings))
    files = list(sizes)
    known = [size for size in sizes.values() if size is not None]
    all_bytes = sum(known) if len(known) == len(files) else None
    downloaded, before = 0, 0  # files fetched now, as opposed to found in the cache; the bytes before this file
    paths: list[Path] = []
    for index, file in enumerate(files, start=1):
        was_cached = isinstance(
            try_to_load_from_cache(model.repo, file, cache_dir=settings.cache_dir, revision=revision), str
        )
        progress_class = _progress_class(callback, _PullPlace(model.name, file, index, len(files), before, all_bytes))
        try:
            if not was_cached and not settings.offline:
                _fetch_resumably(model, file, revision, settings, progress_class)
            path = hf_hub_download(
                model.repo,
                file,
                revision=revision,
                cache_dir=settings.cache_dir,
                endpoint=settings.endpoint,
                local_files_only=settings.offline,
                tqdm_class=progress_class,
            )
        except Exception as error:  # translated into one clear message
            raise _translate(error, model, settings, file) from error
        downloaded += not was_cached
        paths.append(Path(path))
        before += sizes[file] or 0
    if model.file is not None:
        return _verified_result(model, paths[0], [paths[0].name], downloaded)
    _write_ref(settings, model, revision)
    return _verified_result(model, _snapshot_root(paths[0], files[0]), files, downloaded)


def _bytes_to_fetch(model: HubModel, revision: str, sizes: dict[str, int | None], settings: HubSettings) -> int | None:
    """The bytes still to download: the files not in the cache, less what interrupted pulls left of them. None
    where the Hub does not say a file's size."""
    from huggingface_hub import try_to_load_from_cache

    total = 0
    for file, size in sizes.items():
        if isinstance(try_to_load_from_cache(model.repo, file, cache_dir=settings.cache_dir, revision=revision), str):
            continue
        size = size if size is not None else _remote_size(model, file, revision, settings)
        if size is None:
            return None
        total += size
    blobs = settings.cache_dir / ("models--" + model.repo.replace("/", "--")) / "blobs"
    partial = sum(p.stat().st_size for p in blobs.glob("*" + PARTIAL_SUFFIX)) if blobs.is_dir() else 0
    return max(0, total - partial)


def _remote_size(model: HubModel, file: str, revision: str, settings: HubSettings) -> int | None:
    from huggingface_hub import get_hf_file_metadata, hf_hub_url

    try:
        url = hf_hub_url(model.repo, file, revision=revision, endpoint=settings.endpoint)
        return get_hf_file_metadata(url, endpoint=settings.endpoint).size
    except Exception:  # the download that follows says what is wrong, in one line
        return None


def _fetch_resumably(model: HubModel, file: str, revision: str, settings: HubSettings, progress: type) -> None:
    """Download `file` into the cache's blobs through a partial file that an interrupted pull leaves for the
    next one to resume (see the module's note). A file served through Xet is left to hf_hub_download."""
    from huggingface_hub import get_hf_file_metadata, hf_hub_url
    from huggingface_hub.file_download import http_get
    from huggingface_hub.utils import build_hf_headers

    url = hf_hub_url(model.repo, file, revision=revision, endpoint=settings.endpoint)
    headers = build_hf_headers()
    try:
        metadata = get_hf_file_metadata(url, headers=headers, endpoint=settings.endpoint)
    except Exception as error:
        if _is_connection_problem(error):
            return  # hf_hub_download says what it can (the cache, or the network is down)
        raise
    if metadata.xet_file_data is not None or not metadata.etag or not metadata.location:
        return
    repo_folder = "models--" + model.repo.replace("/", "--")
    blobs, locks = settings.cache_dir / repo_folder / "blobs", settings.cache_dir / ".locks" / repo_folder
    blob, partial = blobs / metadata.etag, blobs / (metadata.etag + PARTIAL_SUFFIX)
    blobs.mkdir(parents=True, exist_ok=True)
    locks.mkdir(parents=True, exist_ok=True)
    with locked(locks / (metadata.etag + PARTIAL_SUFFIX + ".lock")):
        if blob.exists():
            return
        done = partial.stat().st_size if partial.exists() else 0
        if metadata.size is not None and done > metadata.size:
            partial.unlink()
            done = 0
        with partial.open("ab") as handle:
            http_get(
                metadata.location,
                handle,
                resume_size=done,
                headers=headers,
                expected_size=metadata.size,
                tqdm_class=progress,
            )
        os.replace(partial, blob)


def _snapshot_root(path: Path, name: str) -> Path:
    for _ in name.split("/"):
        path = path.parent
    return path


def _write_ref(settings: HubSettings, model: HubModel, commit: str) -> None:
    """Record which commit the model's revision (a branch) pointed to, as snapshot_download does, so the
    checkpoint is found offline by its branch name."""
    if model.revision == commit:
        return
    ref = settings.cache_dir / ("models--" + model.repo.replace("/", "--")) / "refs" / model.revision
    ref.parent.mkdir(parents=True, exist_ok=True)
    ref.write_text(commit)


def _local_missing() -> Exception:
    from huggingface_hub.errors import LocalEntryNotFoundError

    return LocalEntryNotFoundError("not in the cache")


def _is_connection_problem(error: Exception) -> bool:
    # huggingface_hub 2 talks through httpx2, earlier versions through httpx: whichever is installed.
    for module in ("httpx2", "httpx"):
        try:
            transport_error = importlib.import_module(module).TransportError
        except (ImportError, AttributeError):
            continue
        if isinstance(error, transport_error):
            return True
    return isinstance(error, ConnectionError)


def _verified_result(model: HubModel, path: Path, files: list[str], downloaded: int) -> PullResult:
    if model.file is not None:
        verify_file(path, model.sha256)
        return PullResult(path, downloaded, path.resolve().stat().st_size, 1)
    total = 0
    for name in files:
        file = path / name
        if file.exists():
            verify_file(file)
            total += file.resolve().stat().st_size
    return PullResult(path, downloaded, total, len(files))


def remove(model: HubModel, settings: HubSettings | None = None) -> int:
    """Delete a pulled model from the HF cache; returns the bytes freed (0 if it was not there)."""
    settings = settings or HubSettings.from_environment()
    if model.file is not None:
        path = cached_path(model, settings)
        return _remove_cached(path) if path is not None else 0
    folder = _snapshot_folder(model, settings)
    if folder is None:
        return 0
    return sum(_remove_cached(file) for file in sorted(folder.rglob("*")) if file.is_symlink() or file.is_file())
