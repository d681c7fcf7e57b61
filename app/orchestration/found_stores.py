"""The models other tools keep on this machine, as the model manager sees them: the stores scanned (once per
session for looking names up, afresh for a listing), each file's header read, a file the catalogue names left
to the catalogue."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path

from models.catalogue import CatalogueEntry, resolve_model
from models.errors import ModelError, UnsupportedModel
from models.found.files import FoundFile, Skipped
from models.found.stores import STORE_LABELS, FoundIndex, StoreContents, examine, scan_stores
from models.hub import HubSettings


class FoundStores:
    """`folders`: the models.folders setting; `catalogue`: the catalogue's entries (a file one names is
    listed under it)."""

    def __init__(self, folders: Callable[[], str], catalogue: Callable[[], dict[str, CatalogueEntry]]) -> None:
        self._folders = folders
        self._catalogue = catalogue
        self._index: FoundIndex | None = None

    def index(self, *, refresh: bool = False) -> FoundIndex:
        """The stores' files by name (directories and manifests only), scanned once unless `refresh`."""
        if self._index is None or refresh:
            cache = HubSettings.from_environment().cache_dir
            self._index = FoundIndex(scan_stores(Path.home(), cache, self._folders()))
        return self._index

    def stores(self) -> list[StoreContents]:
        """Each store's GGUFs with what their headers say (scanned afresh), and what was skipped there and why.
        A file a catalogue entry names is left to the catalogue's listing; one two stores share, to the first."""
        index = self.index(refresh=True)
        catalogued: dict[Path, str] = {}
        for entry in self._catalogue().values():
            if not entry.is_remote:
                with contextlib.suppress(ModelError, OSError):
                    catalogued[resolve_model(entry.name, {entry.name: entry}).path.absolute()] = entry.name
        listed = {id(file) for file in index.files}
        stores = []
        for scan in index.scans:
            contents = StoreContents(scan, [], list(scan.skipped))
            for file in scan.files:
                entry_name = catalogued.get(file.path.absolute())
                if entry_name is not None:
                    contents.skipped.append(Skipped(file.store, file.name, f"the catalogue lists it as {entry_name}"))
                    continue
                if id(file) not in listed:
                    contents.skipped.append(Skipped(file.store, file.name, "listed already, from an earlier store"))
                    continue
                examined = examine(file)
                if isinstance(examined, Skipped):
                    contents.skipped.append(examined)
                else:
                    contents.models.append(examined)
            stores.append(contents)
        return stores

    def require_runnable(self, found: FoundFile) -> None:
        """A found model Sharpen cannot run is refused with the reason its header gives."""
        examined = examine(found)
        if isinstance(examined, Skipped):
            raise UnsupportedModel(found.path, examined.why)
        if examined.verdict.runs_as is None:
            raise UnsupportedModel(found.path, f"is {examined.verdict.reason}")

    def info(self, found: FoundFile) -> dict[str, object]:
        """Everything known about a found model: its store, what it runs as, and what its header says."""
        examined = examine(found)
        if isinstance(examined, Skipped):
            raise UnsupportedModel(f"{found.name} ({STORE_LABELS[found.store]})", examined.why)
        return examined.as_json() | {"file": examined.info.summary()}

    def why_absent(self, name: str) -> str:
        """Why no store answers to `name` now: what a store skipped under that name, or that none has it."""
        skipped = [item for scan in self.index().scans for item in scan.skipped if item.where == name]
        if skipped:
            return f"{STORE_LABELS[skipped[0].store]} lists it, but {skipped[0].why}"
        return "no file at that path, and no store holds a model of that name any more"
