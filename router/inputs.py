"""What a route is decided from, gathered in one place: the engines' costs on this machine (measured, or
estimated from the models' sizes), which engines have their model present, and how the draft model's
measured drafts compare with AR's. Each figure read from a file is read once per version of that file
(its size and modification time), so routing every request stays cheap; callers run it off the UI thread.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal, Protocol

from engines.diffusion.backend import CacheMode
from engines.llama_load import gpu_offload_available
from engines.threads import available_cores
from models.catalogue import CatalogueEntry, ResolvedModel
from models.errors import ModelError
from models.gguf_info import GGUFInfo
from models.hf_checkpoint import inspect_checkpoint, is_checkpoint_folder
from models.remote import RemoteSource, is_remote_draft
from models.tensor_mix import read_tensor_mix
from router.cost import ExpectedTokens, asked_length
from router.expected_lengths import LEARNT_KINDS, LengthBook, load_lengths
from router.policy import decide
from router.profile import (
    CostProfile,
    DeviceClass,
    ModelSize,
    estimate_profile,
    load_profile,
    scaled_ar,
    scaled_diffusion,
)
from router.remote_draft import RemoteDraftState
from router.request import DiffusionPlan, EngineName, Kind, Policy, QualityGap, Request, Route

FileVersion = tuple[int, int, int]
# Where a caller has not asked the remote draft engine how it stands: ask it (one status call).
Ask = Literal["ask"]


class ServedDraft(Protocol):
    @property
    def cached(self) -> bool:
        """Whether the draft model runs with a KV cache."""
        ...


class ModelLookup(Protocol):
    """What routing asks of the models (app/orchestration/model_manager.py's ModelManager)."""

    def resolve(self, name: str) -> ResolvedModel: ...

    def entry(self, name: str) -> CatalogueEntry: ...

    def remote(self, name: str) -> RemoteSource | None: ...

    def gguf_info(self, path: Path) -> GGUFInfo: ...

    def served_file(self, path: Path, *, write: bool = True) -> ServedDraft: ...

    def runnable_cache(self) -> CacheMode: ...


@dataclass(frozen=True)
class RoutingSetup:
    """What routing reads of the configuration: the models of both roles and the quality gate's margins."""

    complete_model: str
    draft_model: str
    draft_cache: CacheMode
    gpu_layers: int
    policy: Policy
    latency_budget_s: float
    quality_margin: float
    on_topic_margin: float
    repeats_margin: float
    faithful_margin: float


@dataclass(frozen=True)
class Gathered:
    """One route's inputs: the costs (and a warning where a saved profile could not be used), the engines
    whose model is present (engine -> model name) and the draft model's quality gap, where measured."""

    profile: CostProfile
    warning: str | None
    present: dict[EngineName, str]
    quality_gap: QualityGap | None


def _version(path: Path) -> FileVersion | None:
    try:
        stat = path.stat()
    except OSError:
        return None
    return stat.st_size, stat.st_mtime_ns, stat.st_ino  # a file replaced atomically is a new inode


class RouteInputs:
    def __init__(
        self,
        models: ModelLookup,
        profile_path: Path,
        lengths_path: Path,
        setup: Callable[[], RoutingSetup],
        remote_draft: Callable[[], RemoteDraftState] | None = None,
    ) -> None:
        self.models = models
        # How the configured remote draft engine stands (models.draft = sharpen:URL or openai:URL#MODEL).
        self._remote_draft = remote_draft
        self.profile_path = profile_path
        self.lengths_path = lengths_path
        self._setup = setup
        self._lock = threading.Lock()
        self._sizes: dict[tuple[str, str, CacheMode, FileVersion], ModelSize | None] = {}
        self._saved: dict[tuple[DeviceClass, FileVersion | None], tuple[CostProfile, str | None]] = {}
        self._lengths: tuple[FileVersion | None, tuple[LengthBook, str | None]] | None = None

    def gather(self, remote: RemoteDraftState | Ask | None = "ask") -> Gathered:
        """What a route is decided from; `remote`: the remote draft engine as the caller found it just now."""
        remote = self.remote_draft() if isinstance(remote, str) else remote
        profile, warning = self.cost_profile(remote)
        present = self.present_engines(remote)
        return Gathered(profile, warning, present, self.quality_gap(present))

    def route(
        self, request: Request, plan: DiffusionPlan, policy: Policy | None = None, *, as_asked: bool = False
    ) -> Route:
        """The route for `request` (NoEngineAvailable if no engine can serve it); a request that names no
        latency budget gets the configured one. Its estimates are for the length each engine's drafts are
        expected to write, or (`as_asked`) for the length asked."""
        setup = self._setup()
        if request.latency_budget_s is None and setup.latency_budget_s > 0:
            request = replace(request, latency_budget_s=setup.latency_budget_s)
        remote = self.remote_draft()
        down = remote.down if remote is not None else ""
        if down:  # a draft asked of the remote engine goes to this machine's instead, and the reason says so
            request = replace(request, force_engine=None, forced_because="")
        inputs = self.gather(remote)
        expected = asked_length if as_asked else self.expected_tokens(request.kind, inputs.present)
        policy = policy or setup.policy
        route = decide(request, inputs.profile, inputs.present, plan, policy, inputs.quality_gap, expected)
        if down and route.engine == "ar":
            route = replace(route, reason=f"{down}: AR on this machine drafts instead", rule="remote_down")
        elif remote is not None and route.engine == "diffusion" and not remote.animated:
            route = replace(route, reason=f"{route.reason}; {remote.label} sends text only: nothing animates")
        return route

    def remote_draft(self) -> RemoteDraftState | None:
        """How the remote draft engine stands, where models.draft names one (None for a local draft model)."""
        if self._remote_draft is None or not is_remote_draft(self._setup().draft_model.strip()):
            return None
        return self._remote_draft()

    def draft_lengths(self) -> tuple[LengthBook, str | None]:
        """How long each engine's drafts ran (or nothing, and why), read once per version of the file."""
        key = _version(self.lengths_path)
        with self._lock:
            if self._lengths is None or self._lengths[0] != key:  # rewritten after every draft: keep the last
                self._lengths = key, load_lengths(self.lengths_path)
            return self._lengths[1]

    def expected_tokens(self, kind: Kind, present: Mapping[EngineName, str]) -> ExpectedTokens:
        """The tokens each present engine's drafts of `kind` are expected to write (the length asked, for
        kinds never routed by their estimates)."""
        if kind not in LEARNT_KINDS:
            return asked_length
        return self.draft_lengths()[0].expected_tokens(kind, present)

    def device_class(self) -> DeviceClass:
        return "gpu" if gpu_offload_available() and self._setup().gpu_layers != 0 else "cpu"

    def saved_profile(self, device: DeviceClass) -> tuple[CostProfile, str | None]:
        """The calibration profile saved on this machine (or the defaults, and why), read once per version."""
        key = (device, _version(self.profile_path))
        with self._lock:
            if key not in self._saved:
                self._saved[key] = load_profile(self.profile_path, device)
            return self._saved[key]

    def cost_profile(self, remote: RemoteDraftState | Ask | None = "ask") -> tuple[CostProfile, str | None]:
        """The costs the router uses, and a warning if a saved profile could not be used. Each engine's costs
        are the ones measured for the configured model; a model never measured (none saved, or the role's
        model changed since) gets the measured model's costs scaled by the two files' work, or where that is
        unknown costs estimated from its size."""
        setup, device = self._setup(), self.device_class()
        saved, warning = self.saved_profile(device)
        ar_size, draft_size = self.model_size("complete"), self.model_size("draft")
        estimate = estimate_profile(device, available_cores(), ar_size, draft_size)
        if self._remote_complete(setup):  # no size to estimate from: the default costs, under the model's name
            estimate = replace(estimate, ar=replace(estimate.ar, model=setup.complete_model))
        ar = estimate.ar
        if saved.calibrated and saved.ar.model == estimate.ar.model:
            ar = saved.ar
        elif saved.calibrated and ar_size is not None:
            # Another model was measured: its costs, scaled by the two files' work, know this machine.
            ar = scaled_ar(saved.ar, ar_size) or ar
        diffusion = estimate.diffusion
        if saved.calibrated and saved.diffusion.model == estimate.diffusion.model:
            # A pass's measured cost holds whatever cache runs; how many positions a pass decodes follows
            # the cache that will run now (diffusion.cache may have changed since the calibration).
            diffusion = replace(saved.diffusion, cache=estimate.diffusion.cache)
        elif saved.calibrated and draft_size is not None:
            diffusion = scaled_diffusion(saved.diffusion, draft_size, device) or diffusion
        remote = self.remote_draft() if isinstance(remote, str) else remote
        if remote is not None:  # measured on its own machine, plus the round trip from this one
            diffusion = replace(remote.costs, model=remote.model)
        return replace(saved, ar=ar, diffusion=diffusion), warning

    def model_size(self, role: str) -> ModelSize | None:
        """The configured model's size, for cost estimates; None if it is missing or unreadable. Read once
        per version of the file."""
        setup = self._setup()
        name = (setup.complete_model if role == "complete" else setup.draft_model).strip()
        if (
            not name
            or (role == "complete" and self._remote_complete(setup))
            or (role == "draft" and is_remote_draft(name))
        ):
            return None
        try:
            model = self.models.resolve(name)
        except ModelError:
            return None
        version = _version(model.path)
        if version is None:
            return None
        key = (role, name, setup.draft_cache, version)
        with self._lock:
            known = key in self._sizes
        if not known:
            size = self._read_size(role, model, setup.draft_cache)
            with self._lock:
                self._sizes[key] = size
        return self._sizes[key]

    def _read_size(self, role: str, model: ResolvedModel, draft_cache: CacheMode) -> ModelSize | None:
        try:
            if is_checkpoint_folder(model.path):
                checkpoint = inspect_checkpoint(model.path)
                cache = draft_cache if role == "draft" else "none"
                cache = _trained_for(cache, checkpoint.spec.block_causal_length)
                shift = int(checkpoint.spec.shift_logits)
                return ModelSize(model.name, checkpoint.parameter_count, checkpoint.size_bytes, cache, shift_rows=shift)
            info = self.models.gguf_info(model.path)
            cacheable = role == "draft" and self.models.served_file(model.path, write=False).cached
            cache = _trained_for(self.models.runnable_cache(), info.block_causal_length) if cacheable else "none"
            mix = read_tensor_mix(info.path)
            return ModelSize(model.name, info.n_parameters, info.file_size, cache, mix, int(info.shift_logits))
        except ModelError:
            return None

    def _remote_complete(self, setup: RoutingSetup) -> bool:
        try:
            return self.models.remote(setup.complete_model) is not None
        except ModelError:
            return False

    def present_engines(self, remote: RemoteDraftState | Ask | None = "ask") -> dict[EngineName, str]:
        """Engine -> model name, for the engines whose model file is present."""
        setup = self._setup()
        present: dict[EngineName, str] = {}
        configured: tuple[tuple[EngineName, str], ...] = (
            ("ar", setup.complete_model),
            ("diffusion", setup.draft_model),
        )
        remote = self.remote_draft() if isinstance(remote, str) else remote
        for engine, name in configured:
            if not name.strip():
                continue
            if engine == "diffusion" and remote is not None:
                if not remote.down:
                    present[engine] = remote.model
                continue
            if engine == "ar" and self._remote_complete(setup):
                present[engine] = name  # whether it answers shows on the first request
                continue
            try:
                path = self.models.resolve(name).path
                if path.is_file() or (engine == "diffusion" and is_checkpoint_folder(path)):
                    present[engine] = name
            except ModelError:
                continue
        return present

    def quality_gap(self, present: Mapping[EngineName, str]) -> QualityGap | None:
        """How the draft model's measured drafts compare with the AR model's, where the catalogue measured the
        draft model (an AR model not measured counts as its own drafts: position 0, no repeats)."""
        if "ar" not in present or "diffusion" not in present:
            return None
        ar, draft = (self._entry(present[engine]) for engine in ("ar", "diffusion"))
        figures = (
            (
                draft.drafts_position,
                draft.drafts_on_topic,
                draft.drafts_repeats,
                draft.rewrites_kept,
                draft.drafts_facts,
                draft.drafts_flips,
            )
            if draft
            else ()
        )
        if draft is None or max(figures) < 0:
            return None
        setup = self._setup()
        # Rounded: the catalogue's figures have two decimals, and 0.33 - 0.03 must not read as over 0.30.
        behind = round((_measured(draft, "drafts_position") or 0.0) - (_measured(ar, "drafts_position") or 0.0), 6)
        return QualityGap(
            present["diffusion"],
            behind,
            setup.quality_margin,
            on_topic=_measured(draft, "drafts_on_topic"),
            ar_on_topic=_measured(ar, "drafts_on_topic"),
            on_topic_margin=setup.on_topic_margin,
            repeats=_measured(draft, "drafts_repeats"),
            # An AR model the catalogue did not measure counts as its own drafts here too: under its loop
            # control (chat.no_repeat_ngram) none of its word 3-grams repeat (the embedded one's: 1%).
            ar_repeats=_measured(ar, "drafts_repeats") or 0.0,
            repeats_margin=setup.repeats_margin,
            rewrites_kept=_measured(draft, "rewrites_kept"),
            ar_rewrites_kept=_measured(ar, "rewrites_kept"),
            facts=_measured(draft, "drafts_facts"),
            ar_facts=_measured(ar, "drafts_facts"),
            flips=_measured(draft, "drafts_flips"),
            ar_flips=_measured(ar, "drafts_flips"),
            faithful_margin=setup.faithful_margin,
        )

    def _entry(self, name: str) -> CatalogueEntry | None:
        try:
            return self.models.entry(name)
        except ModelError:  # a model named by its path
            return None


def _trained_for(cache: CacheMode, block_causal_length: int) -> CacheMode:
    """The cache a draft model is estimated with: a model trained block-causally decodes block by block (the
    backends force it; full attention would run another model), unless every cache is off. Under "none"
    the torch backend re-decodes every pass under a block mask, as estimated; llama.cpp, which has no such
    mask inside one batch, keeps the block cache, so a block-causal GGUF's estimate under "none" reads high."""
    return "block" if block_causal_length and cache != "none" else cache


def _measured(entry: CatalogueEntry | None, figure: str) -> float | None:
    """A catalogue figure, None where it was not measured (stored as a negative number)."""
    value = -1.0 if entry is None else float(getattr(entry, figure))
    return None if value < 0 else value
