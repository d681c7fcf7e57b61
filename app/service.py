"""The one service the TUI and the CLI both call. It owns configuration and loaded engines."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from app.atomic import write_atomic
from app.config import Config, ConfigError, load_config, read_raw, set_value, user_catalogue
from app.paths import SharpenPaths, sharpen_paths
from engines.cancel import CancelToken
from engines.diffusion.backend import DraftBackend
from engines.diffusion.engine import DiffusionEngine
from engines.diffusion.llama_backend import LlamaDiffusionBackend, LlamaDiffusionSettings, check_diffusion_gguf
from engines.diffusion.settings import DiffusionSettings
from engines.diffusion.trace import Trace, TraceError, TraceHeader
from engines.errors import EngineError
from engines.events import Done, DraftStats, Event, Pass
from engines.llama_ar import LlamaAREngine, LlamaSettings, TrimPolicy
from engines.llama_load import gpu_offload_available
from models.catalogue import CatalogueEntry, ResolvedModel, catalogue, resolve_model
from models.errors import ModelError, UnknownModel, UnsupportedModel
from models.fit import check_fit, require_disk, require_fit, this_machine
from models.gguf_info import inspect_gguf
from models.hf_checkpoint import inspect_checkpoint, is_checkpoint_folder
from models.hub import HubSettings, ProgressCallback, PullError, PullResult, cached_path, pull, remove
from router.calibration import CalibrationSizes, Progress, calibrate
from router.cost import DiffusionPlan
from router.policy import NoEngineAvailable, decide
from router.profile import CostProfile, DeviceClass, load_profile, save_profile
from router.request import EngineName, Policy, Request, Route


class RoutingError(Exception):
    pass


# Everything a user can be told about in one message and then exit on.
SharpenError = (ConfigError, ModelError, EngineError, TraceError, RoutingError)


class NoDraftModel(ModelError):
    def __init__(self) -> None:
        super().__init__(
            "no diffusion model is configured for drafts: set one with `sharpen config set models.draft PATH` "
            "(a Dream, LLaDA, LLaDA-MoE or RND1 GGUF, or a Sharpen export)"
        )


@dataclass(frozen=True)
class ModelStatus:
    name: str
    role: str
    engine: str
    description: str
    path: Path | None
    present: bool
    size_bytes: int | None
    in_use_for: tuple[str, ...]
    source: str = ""
    download_bytes: int = 0
    fit: str = ""
    fits: bool = True


def size_on_disk(path: Path) -> int:
    if path.is_dir():
        return sum(p.resolve().stat().st_size for p in path.rglob("*") if p.is_file())
    return path.stat().st_size


class SharpenService:
    def __init__(self, config: Config, paths: SharpenPaths) -> None:
        self.config = config
        self.paths = paths
        self._engine_lock = threading.Lock()
        self._completion_engine: LlamaAREngine | None = None
        self._draft_engine: DiffusionEngine | None = None
        self._catalogue: dict[str, CatalogueEntry] | None = None

    @classmethod
    def from_environment(cls) -> SharpenService:
        paths = sharpen_paths()
        return cls(load_config(paths.config_file), paths)

    # ----- engines -------------------------------------------------------------------------------

    def completion_engine(self) -> LlamaAREngine:
        """The AR engine for the configured completion model, loaded on first use."""
        with self._engine_lock:
            if self._completion_engine is None:
                model = self.resolve(self.config.models.complete)
                self._require_fit_to_load(model)
                ar = self.config.ar
                settings = LlamaSettings(
                    n_ctx=ar.n_ctx, n_threads=ar.n_threads, n_batch=ar.n_batch, n_gpu_layers=ar.n_gpu_layers
                )
                self._completion_engine = LlamaAREngine(model.path, model.name, settings)
            return self._completion_engine

    def draft_engine(self) -> DiffusionEngine:
        """The diffusion engine for the configured draft model, loaded on first use."""
        with self._engine_lock:
            if self._draft_engine is None:
                name = self.config.models.draft.strip()
                if not name:
                    raise NoDraftModel()
                model = self.resolve(name)
                self._require_fit_to_load(model)
                section = self.config.diffusion
                if is_checkpoint_folder(model.path):
                    self._draft_engine = DiffusionEngine(self._torch_backend(model), model.name)
                    return self._draft_engine
                settings = LlamaDiffusionSettings(
                    n_ctx=section.n_ctx,
                    n_threads=section.n_threads,
                    n_gpu_layers=self.config.ar.n_gpu_layers,
                    cache=section.prefix_cache,
                )
                self._draft_engine = DiffusionEngine(LlamaDiffusionBackend(model.path, settings), model.name)
            return self._draft_engine

    def _torch_backend(self, model: ResolvedModel) -> DraftBackend:
        folder = model.path
        # Imported here: torch is an optional extra, and everything else in Sharpen runs without it.
        try:
            from engines.diffusion.hf.backend import TorchDiffusionBackend, TorchDiffusionSettings
            from engines.diffusion.hf.loading import TorchLoadSettings
        except ImportError as error:
            raise UnsupportedModel(
                folder,
                f"is a Hugging Face checkpoint, which needs torch ({error})",
                "Install the torch extra (pip install -e '.[torch]'), or use a GGUF of the model.",
            ) from error
        section = self.config.diffusion
        load = TorchLoadSettings(
            device=section.device,
            dtype=section.dtype,
            quantization=self._quantization_for(model),
            max_gpu_memory_gib=section.max_gpu_memory_gib,
            offload=section.offload,
        )
        settings = TorchDiffusionSettings(
            load=load, cache=section.torch_cache, n_ctx=section.n_ctx, threads=section.n_threads
        )
        return TorchDiffusionBackend(folder, settings)

    def diffusion_settings(self, **overrides: Any) -> DiffusionSettings:
        """The configured draft settings, with any non-None overrides (from the CLI or the UI) applied."""
        section = self.config.diffusion
        configured = DiffusionSettings(
            steps=section.steps,
            schedule=section.schedule,
            block_length=section.block_length,
            threshold=section.threshold or None,
            algorithm=section.algorithm,
            eos=section.eos,
            spacing=section.spacing,
            temperature=section.temperature,
            top_k=section.top_k,
            top_p=section.top_p,
            seed=section.seed,
        )
        settings = replace(configured, **{key: value for key, value in overrides.items() if value is not None})
        return replace(settings, threshold=None) if settings.threshold == 0 else settings

    # ----- routing -------------------------------------------------------------------------------

    @property
    def profile_path(self) -> Path:
        return self.paths.data_dir / "calibration.toml"

    def device_class(self) -> DeviceClass:
        return "gpu" if gpu_offload_available() and self.config.ar.n_gpu_layers != 0 else "cpu"

    def cost_profile(self) -> tuple[CostProfile, str | None]:
        """The calibration profile (or defaults), and a warning if a saved one could not be used."""
        return load_profile(self.profile_path, self.device_class())

    def present_engines(self) -> dict[EngineName, str]:
        """Engine -> model name, for the engines whose model file is present."""
        present: dict[EngineName, str] = {}
        configured: tuple[tuple[EngineName, str], ...] = (
            ("ar", self.config.models.complete),
            ("diffusion", self.config.models.draft),
        )
        for engine, name in configured:
            if not name.strip():
                continue
            try:
                path = self.resolve(name).path
                if path.is_file() or (engine == "diffusion" and is_checkpoint_folder(path)):
                    present[engine] = name
            except ModelError:
                continue
        return present

    def base_plan(self, overrides: DiffusionSettings | None = None) -> DiffusionPlan:
        settings = overrides or self.diffusion_settings()
        return DiffusionPlan(settings.steps, settings.block_length, settings.threshold, settings.schedule)

    @staticmethod
    def settings_for_route(route: Route, base: DiffusionSettings, keep_steps: bool = False) -> DiffusionSettings:
        """The draft settings a diffusion route runs with: the router's K (scaled by the quality preset),
        unless a confidence threshold decides the passes or the user fixed the steps."""
        if keep_steps or base.threshold is not None or "steps" not in route.settings:
            return base
        return replace(base, steps=int(route.settings["steps"]))

    def route(self, request: Request, policy: Policy | None = None, base: DiffusionSettings | None = None) -> Route:
        profile, _warning = self.cost_profile()
        budget = self.config.router.latency_budget_s
        if request.latency_budget_s is None and budget > 0:
            request = replace(request, latency_budget_s=budget)
        try:
            return decide(
                request, profile, self.present_engines(), self.base_plan(base), policy or self.config.router.policy
            )
        except NoEngineAvailable as error:
            raise RoutingError(str(error)) from None

    def calibrate(self, sizes: CalibrationSizes, progress: Progress) -> CostProfile:
        present = self.present_engines()
        ar = self.completion_engine() if "ar" in present else None
        diffusion = self.draft_engine() if "diffusion" in present else None
        profile = calibrate(self.device_class(), ar, diffusion, sizes, progress)
        try:
            save_profile(profile, self.profile_path, write_atomic)
        except OSError as error:
            raise RoutingError(
                f"{self.profile_path}: cannot save the calibration ({error.strerror or error})"
            ) from None
        return profile

    # ----- requests ------------------------------------------------------------------------------

    def complete(
        self,
        prefix: str,
        suffix: str | None = None,
        *,
        max_tokens: int | None = None,
        stop: Sequence[str] = (),
        temperature: float | None = None,
        cancel: CancelToken | None = None,
        trim: TrimPolicy = "left",
    ) -> Iterator[Event]:
        settings = self.config.complete
        return self.completion_engine().complete(
            prefix,
            suffix,
            max_tokens=settings.max_tokens if max_tokens is None else max_tokens,
            stop=tuple(stop),
            temperature=settings.temperature if temperature is None else temperature,
            cancel=cancel,
            trim=trim,
        )

    def chat(
        self,
        instruction: str,
        *,
        max_tokens: int | None = None,
        temperature: float | None = None,
        cancel: CancelToken | None = None,
    ) -> Iterator[Event]:
        settings = self.config.chat
        return self.completion_engine().chat(
            instruction,
            max_tokens=settings.max_tokens if max_tokens is None else max_tokens,
            temperature=settings.temperature if temperature is None else temperature,
            cancel=cancel,
        )

    def draft(
        self,
        instruction: str,
        tokens: int | None = None,
        settings: DiffusionSettings | None = None,
        *,
        chat: bool = True,
        cancel: CancelToken | None = None,
    ) -> Iterator[Pass | Done]:
        engine = self.draft_engine()
        length = self.config.diffusion.tokens if tokens is None else tokens
        return engine.draft(instruction, length, settings or self.diffusion_settings(), chat=chat, cancel=cancel)

    def infill(
        self,
        before: str,
        after: str,
        tokens: int | None = None,
        settings: DiffusionSettings | None = None,
        *,
        cancel: CancelToken | None = None,
    ) -> Iterator[Pass | Done]:
        engine = self.draft_engine()
        length = self.config.diffusion.tokens if tokens is None else tokens
        return engine.infill(before, after, length, settings or self.diffusion_settings(), cancel=cancel)

    def build_trace(self, prompt: str, kind: str, settings: DiffusionSettings, passes: list[Pass], done: Done) -> Trace:
        """A trace of a finished (or cancelled) draft from its events."""
        engine = self.draft_engine()
        stats = done.stats
        if not isinstance(stats, DraftStats):
            raise TypeError("a trace records a diffusion draft")
        trace = Trace(
            TraceHeader(
                model=engine.model_name,
                backend=engine.backend.backend,
                prompt=prompt,
                prompt_tokens=stats.prompt_tokens,
                canvas_length=stats.canvas_tokens,
                mask_token_id=engine.backend.mask_token_id,
                settings=settings.as_dict(),
                created=datetime.now(UTC).isoformat(timespec="seconds"),
                kind=kind,
            ),
            passes=list(passes),
        )
        trace.record(done)
        return trace

    def use_model(self, role: str, name: str, *, force: bool = False) -> None:
        """Point a role ("complete" or "draft") at a model, in the config file and in this session."""
        # A missing, corrupt or wrong-kind file fails here, before the config changes.
        self.check_model(role, name, fit=not force)
        self._set_model(role, name)

    def check_model(self, role: str, name: str, *, fit: bool = True) -> ResolvedModel:
        """The model `name` resolved, read and checked for `role`; a ModelError says what is wrong."""
        if role not in ("complete", "draft"):
            raise ConfigError(f"unknown role {role!r}: use complete or draft")
        model = self.resolve(name)
        path = model.path
        if model.entry is not None and fit:
            self._require_fit(model.entry, action=f"use {name}", override="`--force` uses it anyway.")
        if is_checkpoint_folder(path):
            if role != "draft":
                raise UnsupportedModel(path, "is a diffusion checkpoint", "Completions need an autoregressive GGUF.")
            inspect_checkpoint(path)
            return model
        info = inspect_gguf(path)
        if role == "draft":
            check_diffusion_gguf(info)
        elif info.is_diffusion:
            raise UnsupportedModel(
                info.path, f"is a diffusion model ({info.architecture})", "Completions need an autoregressive model."
            )
        return model

    def _set_model(self, role: str, name: str) -> None:
        set_value(self.paths.config_file, f"models.{role}", name)
        with self._engine_lock:
            if role == "complete":
                self.config = replace(self.config, models=replace(self.config.models, complete=name))
                self._completion_engine = None
            else:
                self.config = replace(self.config, models=replace(self.config.models, draft=name))
                self._draft_engine = None

    # ----- models --------------------------------------------------------------------------------

    def catalogue(self) -> dict[str, CatalogueEntry]:
        """The built-in catalogue plus the user's [catalogue.NAME] entries from config.toml, read once (as
        the rest of the config is): routing resolves models on every request."""
        if self._catalogue is None:
            self._catalogue = catalogue(user_catalogue(read_raw(self.paths.config_file), self.paths.config_file))
        return self._catalogue

    def resolve(self, name: str) -> ResolvedModel:
        return resolve_model(name, self.catalogue())

    def entry(self, name: str) -> CatalogueEntry:
        entries = self.catalogue()
        if name not in entries:
            raise UnknownModel(name, sorted(entries))
        return entries[name]

    def models(self) -> list[ModelStatus]:
        in_use = {"complete": self.config.models.complete, "draft": self.config.models.draft}
        machine = this_machine()
        statuses: list[ModelStatus] = []
        for entry in self.catalogue().values():
            try:
                path: Path | None = resolve_model(entry.name, {entry.name: entry}).path
            except ModelError:
                path = None
            present = path is not None and (path.is_file() or is_checkpoint_folder(path))
            verdict = check_fit(entry, machine)
            statuses.append(
                ModelStatus(
                    name=entry.name,
                    role=entry.role,
                    engine=entry.engine,
                    description=entry.description,
                    path=path,
                    present=present,
                    size_bytes=size_on_disk(path) if present and path else None,
                    in_use_for=tuple(role for role, name in in_use.items() if name == entry.name),
                    source=entry.source,
                    download_bytes=entry.size_bytes,
                    fit=verdict.reason,
                    fits=verdict.fits,
                )
            )
        return statuses

    def model_info(self, name: str) -> dict[str, object]:
        """Everything known about one catalogue model: the entry, where it is, whether it fits, and what
        the file itself says if it is present."""
        entry = self.entry(name)
        status = next(s for s in self.models() if s.name == name)
        info: dict[str, object] = {
            key: value for key, value in asdict(entry).items() if key not in ("name",) and value not in ("", 0, 0.0)
        }
        info |= {"name": name, "present": status.present, "path": str(status.path) if status.path else None}
        info |= {"in_use_for": list(status.in_use_for), "fits": status.fits, "fit": status.fit}
        if status.present and status.path is not None:
            details = (
                inspect_checkpoint(status.path).summary()
                if is_checkpoint_folder(status.path)
                else inspect_gguf(status.path).summary()
            )
            info["file"] = details
        return info

    def pull_model(
        self, name: str, *, offline: bool = False, force: bool = False, progress: ProgressCallback | None = None
    ) -> PullResult:
        """Download a catalogue model into the Hugging Face cache (after the fit and disk checks)."""
        entry = self.entry(name)
        settings = HubSettings.from_environment(offline=offline)
        if not entry.is_hub:
            raise PullError(
                f"{name} is {'embedded in Sharpen' if entry.is_embedded else 'a local model'}: nothing to pull"
            )
        if not force and cached_path(entry, settings) is None:
            self._require_fit(entry, action=f"download {name}", override="`--force` downloads it anyway.")
            if not settings.offline:
                require_disk(entry, settings.cache_dir, override="`--force` downloads it anyway.")
        return pull(entry, settings=settings, progress=progress)

    def remove_model(self, name: str) -> int:
        """Delete a pulled model from the Hugging Face cache; the bytes freed."""
        entry = self.entry(name)
        in_use = [role for role in ("complete", "draft") if getattr(self.config.models, role) == name]
        if in_use:
            raise PullError(
                f"{name} is in use for {' and '.join(in_use)}; switch to another model first "
                f"(`sharpen models use OTHER --for {in_use[0]}`)"
            )
        return remove(entry)

    def _require_fit(self, entry: CatalogueEntry, *, action: str, override: str) -> None:
        if entry.needs_ram_gib or entry.needs_vram_gib:
            require_fit(entry, this_machine(), action=action, override=override)

    def _require_fit_to_load(self, model: ResolvedModel) -> None:
        if model.entry is not None and self.config.models.check_fit:
            self._require_fit(
                model.entry,
                action=f"load {model.name}",
                override="`sharpen config set models.check_fit false` loads it anyway.",
            )

    def _quantization_for(self, model: ResolvedModel) -> str:
        chosen = self.config.diffusion.quantization
        if chosen != "auto":
            return chosen
        entry = model.entry
        if entry is not None and entry.format == "hf-safetensors" and entry.quantization in ("nf4", "int8"):
            return entry.quantization
        return "none"
