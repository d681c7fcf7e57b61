"""The models Sharpen knows: the catalogue, where each model is, whether it fits, pulling and removing."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from dataclasses import asdict
from pathlib import Path

from app.orchestration.found_stores import FoundStores
from app.orchestration.model_records import ROLE_WORK, ModelStatus, ServedFile, Serving, size_on_disk
from app.storage.config import Config, ConfigError, ModelsSection, read_raw, user_catalogue
from app.storage.paths import SharpenPaths
from engines.diffusion.backend import CacheMode
from engines.diffusion.llama_backend import check_diffusion_gguf, runnable_cache
from models.adapted import (
    AdaptedModel,
    adapted_model,
    adapter_info,
    current_merge,
    is_adapter,
    require_diffusion,
    write_merge,
)
from models.catalogue import CatalogueEntry, ResolvedModel, catalogue, looks_like_path, resolve_model, writer_for
from models.errors import ModelError, ModelFileError, UnknownModel, UnsupportedModel
from models.fit import Machine, check_fit, require_disk, require_fit, this_machine
from models.found.files import Skipped
from models.found.precedence import resolve_name, written_as_found_name
from models.found.stores import STORE_LABELS, FoundModel
from models.gguf_info import GGUFInfo, inspect_gguf
from models.gguf_pull import (
    converts_to_gguf,
    current_gguf,
    remove_ggufs,
)
from models.gguf_twin import (
    TwinError,
    TwinProgress,
    check_room,
    current_twin,
    remove_twin,
    twin_architecture,
    why_no_twin,
    write_twin,
)
from models.hf_checkpoint import inspect_checkpoint, is_checkpoint_folder
from models.hub import HubSettings, ProgressCallback, PullError, PullResult, cached_path, pull, remove
from models.remote import RemoteSource, is_remote, is_remote_draft, parse_remote, parse_remote_draft

# complete: ghost-text completions; write: drafts, rewrites and chat replies through the AR engine (the
# complete model's where models.write is empty); draft: the diffusion engine's drafts and rewrites.
ROLES = ("complete", "write", "draft")
AR_ROLES = ("complete", "write")


def writing_model(models: ModelsSection, entries: Mapping[str, CatalogueEntry]) -> str:
    """The model drafts, rewrites and chat replies run on through the AR engine: models.write, or where that
    is empty the complete model's writing adapter in the catalogue (`entries`: sharpen-write for the embedded
    model, or one the user's [catalogue.NAME] tables declare with writes_for), else the complete model itself."""
    return models.write.strip() or writer_for(models.complete, entries) or models.complete


class ModelManager:
    """Reads the catalogue (the built-in one plus the user's [catalogue.NAME] tables) once, as the rest of
    the config is read: routing resolves models on every request."""

    def __init__(self, paths: SharpenPaths, config: Callable[[], Config]) -> None:
        self.paths = paths
        self._config = config
        self._catalogue: dict[str, CatalogueEntry] | None = None
        self.found = FoundStores(lambda: self._config().models.folders, self.catalogue)

    def catalogue(self) -> dict[str, CatalogueEntry]:
        if self._catalogue is None:
            self._catalogue = catalogue(user_catalogue(read_raw(self.paths.config_file), self.paths.config_file))
        return self._catalogue

    def resolve(self, name: str) -> ResolvedModel:
        """A path, a catalogue name or a found model's name as a model on disk (models/found/precedence.py). A
        block-causal checkpoint's entry resolves to its GGUF once one was written (`models pull NAME --gguf`,
        `models convert NAME`): it runs on llama.cpp; until then, to the checkpoint in the Hugging Face cache
        (torch)."""
        entry = self.catalogue().get(name)
        if entry is not None and not (looks_like_path(name) and Path(name).expanduser().exists()):
            return self._located(entry)
        return resolve_name(name, self.catalogue(), self.found.index)

    def _located(self, entry: CatalogueEntry) -> ResolvedModel:
        if converts_to_gguf(entry):
            gguf = current_gguf(self.converted_dir, entry.name)
            if gguf is not None:
                return ResolvedModel(entry.name, gguf, entry)
        return resolve_model(entry.name, {entry.name: entry})

    def found_models(self) -> tuple[list[FoundModel], list[Skipped]]:
        """Every store's models and skipped files together (the stores scanned afresh)."""
        stores = self.found.stores()
        return [m for s in stores for m in s.models], [k for s in stores for k in s.skipped]

    def missing(self, name: str) -> str | None:
        """Why a configured model written as a found model's name has no file now; None where it has one, or
        is a path, a catalogue or remote model (their absence is an error, as it always was), or none is set."""
        if not written_as_found_name(name) or name in self.catalogue() or is_remote_draft(name):
            return None
        model: ResolvedModel | None = None
        try:
            if self.remote(name) is not None:
                return None
            model = self.resolve(name)
        except UnknownModel:
            pass
        except ModelError as error:
            return str(error)
        if model is not None and (model.path.is_file() or is_checkpoint_folder(model.path)):
            return None
        if model is not None and model.found is not None:
            return f"its file {model.path} is gone (moved or deleted)"
        return self.found.why_absent(name)

    def serving(self, role: str) -> Serving:
        """The model that serves `role` now: the configured one, or where its file is gone the role's embedded
        model (for writing, the complete model's), with the line that says so. The setting itself is kept."""
        models = self._config().models
        if role == "write" and not models.write.strip():
            writer = writing_model(models, self.catalogue())  # the complete model's writing adapter where one ships
            return self.serving("complete") if writer == models.complete else Serving(writer, writer)
        configured = getattr(models, role)
        why = self.missing(configured)
        if why is None:
            return Serving(configured, configured)
        stand_in = self.serving("complete").name if role == "write" else getattr(ModelsSection(), role)
        note = f"models.{role} {configured!r}: {why}; {ROLE_WORK[role]} use {stand_in} until it is back"
        return Serving(configured, stand_in, note)

    def adapted(self, adapter: Path) -> AdaptedModel:
        """An adapter GGUF with its base: the catalogue entry whose sha256 is the base's, its file
        verified (hashed once per version of the file)."""
        info = adapter_info(adapter)
        candidates: dict[str, Path] = {}
        for name, entry in self.catalogue().items():
            if entry.sha256 == info.base_sha256 and not is_remote(entry.source):
                with contextlib.suppress(ModelError):
                    candidates[name] = self.resolve(name).path
        return adapted_model(info, candidates, self.adapters_dir)

    def gguf_info(self, path: Path) -> GGUFInfo:
        """What a GGUF runs as: the file's own header, or for an adapter its base as the adapted model."""
        return self.adapted(path).info if is_adapter(path) else inspect_gguf(path)

    def remote(self, name: str) -> RemoteSource | None:
        """The server behind a remote model (`openai:URL#MODEL`, or a catalogue entry with that source);
        None for a local one. A malformed source raises BadRemoteSource."""
        entry = self.catalogue().get(name)
        source = entry.source if entry is not None else name
        return parse_remote(source) if is_remote(source) else None

    def entry(self, name: str) -> CatalogueEntry:
        entries = self.catalogue()
        if name not in entries:
            raise UnknownModel(name, sorted(entries))
        return entries[name]

    def in_use_for(self, name: str) -> tuple[str, ...]:
        """The roles `name` serves (the complete model serves writing too where it is the writing model)."""
        models = self._config().models
        serving = {"complete": models.complete, "write": writing_model(models, self.catalogue()), "draft": models.draft}
        return tuple(role for role in ROLES if serving[role] == name)

    def status(self, entry: CatalogueEntry, machine: Machine) -> ModelStatus:
        if entry.is_remote:
            return ModelStatus(entry, None, None, self.in_use_for(entry.name), check_fit(entry, machine))
        try:
            path: Path | None = self._located(entry).path
        except ModelError:
            path = None
        present = path is not None and (path.is_file() or is_checkpoint_folder(path))
        return ModelStatus(
            entry=entry,
            path=path,
            size_bytes=size_on_disk(path) if present and path else None,
            in_use_for=self.in_use_for(entry.name),
            fit=check_fit(entry, machine),
        )

    def statuses(self) -> list[ModelStatus]:
        machine = this_machine()  # asks nvidia-smi: once per listing
        return [self.status(entry, machine) for entry in self.catalogue().values()]

    def info(self, name: str) -> dict[str, object]:
        """Everything known about one catalogue model: the entry, where it is, whether it fits, and what
        the file itself says if it is present. A found model: its store, what it runs as, and its header."""
        if name not in self.catalogue():
            model = self.resolve(name)
            if model.found is not None:
                return self.found.info(model.found) | {"in_use_for": list(self.in_use_for(model.name))}
        status = self.status(self.entry(name), this_machine())
        info: dict[str, object] = {
            key: value for key, value in asdict(status.entry).items() if key != "name" and value not in ("", 0, 0.0)
        }
        info |= {"name": name, "present": status.present, "path": str(status.path) if status.path else None}
        info |= {"in_use_for": list(status.in_use_for), "fits": status.fit.fits, "fit": status.fit.reason}
        if status.present and status.path is not None:
            if is_checkpoint_folder(status.path):
                info["file"] = inspect_checkpoint(status.path).summary()
            else:
                adapter = self.adapted(status.path) if is_adapter(status.path) else None
                info["file"] = (adapter.info if adapter else inspect_gguf(status.path)).summary()
                if adapter is not None:
                    info["adapter"] = {
                        "path": str(status.path),
                        "base": str(adapter.base),
                        "base_sha256": adapter.adapter.base_sha256,
                        "rank": adapter.adapter.rank,
                        "alpha": adapter.adapter.alpha,
                    }
                if status.entry.role == "draft":
                    served = self.served_file(status.path, write=False)
                    mode = self.runnable_cache() if served.cached else "none"
                    info["cache"] = f"{mode}; " + (served.note or "the file has a KV cache")
                elif adapter is not None:
                    info["served"] = self.served_ar(status.path, write=False).note
                with contextlib.suppress(ModelError):
                    checkpoint = resolve_model(name, {name: status.entry}).path
                    if converts_to_gguf(status.entry) and is_checkpoint_folder(checkpoint):
                        info["checkpoint"] = f"{checkpoint} (the torch backend runs it by this path)"
        return info

    def check(self, role: str, name: str, *, fit: bool = True) -> ResolvedModel:
        """The model `name` resolved, read and checked for `role`; a ModelError says what is wrong."""
        if role not in ROLES:
            raise ConfigError(f"unknown role {role!r}: use {', '.join(ROLES)}")
        if role == "draft" and is_remote_draft(name):
            parse_remote_draft(name)  # whether it answers shows on the next route
            return ResolvedModel(name=name, path=Path(name), entry=None)
        remote = self.remote(name)
        if remote is not None:
            if role not in AR_ROLES:
                raise UnsupportedModel(
                    Path(name), "is a remote AR model", "Drafts need a diffusion model, here or on another machine."
                )
            return ResolvedModel(name=name, path=Path(name), entry=self.catalogue().get(name))
        model = self.resolve(name)
        if model.found is None:
            return self._checked(role, model, fit=fit)
        label = f"{model.name} ({STORE_LABELS[model.found.store]})"
        try:
            self.found.require_runnable(model.found)
            return self._checked(role, model, fit=fit)
        except ModelFileError as error:  # said of the name the writer knows, not of a blob's digest
            raise type(error)(label, error.problem, error.hint) from None

    def _checked(self, role: str, model: ResolvedModel, *, fit: bool) -> ResolvedModel:
        name, path = model.name, model.path
        if model.entry is not None and fit:
            self.require_fit(model.entry, action=f"use {name}", override="`--force` uses it anyway.")
        if is_checkpoint_folder(path):
            if role != "draft":
                raise UnsupportedModel(path, "is a diffusion checkpoint", "Completions need an autoregressive GGUF.")
            inspect_checkpoint(path)
            return model
        if role == "draft" and is_adapter(path):
            require_diffusion(adapter_info(path))
        info = self.gguf_info(path)
        if role == "draft":
            check_diffusion_gguf(info)
        elif info.is_diffusion:
            raise UnsupportedModel(
                info.path, f"is a diffusion model ({info.architecture})", "Completions need an autoregressive model."
            )
        return model

    def pull(
        self,
        name: str,
        *,
        offline: bool = False,
        force: bool = False,
        progress: ProgressCallback | None = None,
        twin_progress: TwinProgress | None = None,
    ) -> PullResult:
        """Download a catalogue model into the Hugging Face cache (after the fit and disk checks); a diffusion
        GGUF's cacheable twin is written next, into Sharpen's data dir (the HF cache is left as it is)."""
        entry = self.entry(name)
        settings = HubSettings.from_environment(offline=offline)
        if not entry.is_hub:
            raise PullError(
                f"{name} is {'embedded in Sharpen' if entry.is_embedded else 'a local model'}: nothing to pull"
            )
        override = "`--force` downloads it anyway."

        def require_room(needed: int | None) -> None:  # the Hub's sizes, else the catalogue's
            require_disk(name, entry.size_bytes if needed is None else needed, settings.cache_dir, override=override)

        checked = not force and cached_path(entry.hub_model, settings) is None
        if checked:
            self.require_fit(entry, action=f"download {name}", override=override)
        result = pull(
            entry.hub_model, settings=settings, progress=progress, require_room=require_room if checked else None
        )
        if entry.role == "draft" and entry.format == "gguf" and result.path.is_file():
            with contextlib.suppress(ModelFileError):  # a file llama.cpp cannot read says so when it is used
                self.served_file(result.path, progress=twin_progress)
        return result

    def remove(self, name: str) -> int:
        """Delete a pulled model from the Hugging Face cache (and the GGUF written from it); the bytes freed. A
        found model is never deleted."""
        if name not in self.catalogue():
            found = self.resolve(name).found
            if found is not None:
                store = STORE_LABELS[found.store]
                raise PullError(f"{found.name} is in {store}'s store: Sharpen reads other tools' stores, never deletes")
        entry = self.entry(name)
        in_use = self.in_use_for(name)
        if in_use:
            raise PullError(
                f"{name} is in use for {' and '.join(in_use)}; switch to another model first "
                f"(`sharpen models use OTHER --for {in_use[0]}`)"
            )
        twin_freed = 0
        with contextlib.suppress(ModelError):
            path = self.resolve(name).path
            twin_freed = remove_twin(path, self.twins_dir) if path.is_file() else 0
        if not entry.is_hub:
            raise PullError(
                f"{entry.name} is not a downloaded model (source {entry.source}); Sharpen will not delete it"
            )
        return remove(entry.hub_model) + twin_freed + remove_ggufs(self.converted_dir, name)

    @property
    def twins_dir(self) -> Path:
        return self.paths.data_dir / "twins"

    @property
    def converted_dir(self) -> Path:
        """Block-causal checkpoints written as GGUFs for llama.cpp."""
        return self.paths.data_dir / "converted"

    @property
    def adapters_dir(self) -> Path:
        """Adapters' verified bases and merged copies."""
        return self.paths.data_dir / "adapters"

    def runnable_cache(self) -> CacheMode:
        """The cache a cacheable draft file runs with: diffusion.cache, less "dual" once a loaded model
        found this llama.cpp without Sharpen's patch (routing never loads a model to find out)."""
        return runnable_cache(self._config().diffusion.cache)

    def served_file(self, path: Path, *, write: bool = True, progress: TwinProgress | None = None) -> ServedFile:
        """What a draft GGUF runs from: itself if llama.cpp keeps a KV cache for it; for llama.cpp's diffusion
        architectures (no KV cache) its cacheable twin in the data dir, written here if `write` (once per
        version of the source); the native file with full re-decoding where there is no twin or no room;
        for an adapter, its base with the adapter applied (a ModelFileError if the base is missing)."""
        if is_adapter(path):
            return self._served_adapter(path, write, diffusion=True)
        info = inspect_gguf(path)
        if not info.is_llama_cpp_diffusion:
            return ServedFile(path, info.is_cacheable_diffusion, "")
        full = "every pass re-decodes the whole sequence"
        twin = twin_architecture(info.architecture)
        if self._config().diffusion.cache == "none":
            return ServedFile(path, False, f"{full}: diffusion.cache is none")
        if twin is None:
            return ServedFile(path, False, f"{full}: {why_no_twin(info.architecture)}")
        if info.mask_token_id is None:
            return ServedFile(path, False, f"{full}: the file names no mask token for its cacheable copy")
        cached = f"served as its causal twin ({twin}), which keeps a KV cache"
        try:
            existing = current_twin(path, self.twins_dir, verify=write)
            if existing is None and not write:
                check_room(path, self.twins_dir)
                return ServedFile(path, True, f"{cached}; its copy is written on first use")
            served = existing or write_twin(path, self.twins_dir, progress)
        except TwinError as error:
            return ServedFile(path, False, f"{full}: {error.problem}")
        except (OSError, ValueError) as error:
            return ServedFile(path, False, f"{full}: its cacheable copy could not be written ({error})")
        return ServedFile(served, True, f"{cached}: {served}")

    def served_ar(self, path: Path, *, write: bool = True) -> ServedFile:
        """What an AR model runs from: the GGUF itself; for an AR adapter (sharpen-write), its base merged with
        it, written into the data dir here if `write` (once per version of the adapter), or its base with the
        adapter applied at load where the merge cannot be written. A diffusion adapter is refused."""
        if not is_adapter(path):
            return ServedFile(path, True, "")
        return self._served_adapter(path, write, diffusion=False)

    def _served_adapter(self, path: Path, write: bool, *, diffusion: bool) -> ServedFile:
        """An adapter runs from its base merged with it (written once: a drafter's pass costs half what applying
        the LoRA at load does; for an AR adapter, see AR_MERGED_QUANTIZATION), or else from the base with the
        LoRA applied at load."""
        adapted = self.adapted(path)
        if diffusion:
            require_diffusion(adapted.adapter)
        elif adapted.adapter.makes_diffusion:
            raise UnsupportedModel(
                path,
                "is a diffusion adapter (it makes its base a drafter), not an autoregressive model",
                "Use it for drafts (`sharpen config set models.draft PATH`).",
            )
        merged, why = current_merge(adapted, self.adapters_dir), "its merged copy is written on first use"
        if merged is None and write:
            try:
                merged = write_merge(adapted, self.adapters_dir)
            except (ModelFileError, OSError, ValueError) as error:
                why = f"its merged copy could not be written ({error})"
        if merged is not None:
            return ServedFile(
                merged, True, f"{adapted.base.name} with the LoRA adapter {path.name} merged in: {merged}"
            )
        made = " made bidirectional," if diffusion else ""
        note = f"{adapted.base.name}{made} with the LoRA adapter {path.name} applied at load; {why}"
        return ServedFile(adapted.base, True, note, adapter=path)

    def require_fit(self, entry: CatalogueEntry, *, action: str, override: str) -> None:
        if entry.needs_ram_gib or entry.needs_vram_gib:
            require_fit(entry, this_machine(), action=action, override=override)

    def require_fit_to_load(self, model: ResolvedModel) -> None:
        if model.entry is not None and self._config().models.check_fit:
            self.require_fit(
                model.entry,
                action=f"load {model.name}",
                override="`sharpen config set models.check_fit false` loads it anyway.",
            )
