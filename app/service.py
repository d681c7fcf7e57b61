"""The one service the TUI and the CLI both call: one call per intent, each returning a Reply.

It owns the configuration, the loaded engines and the routing; app/model_manager.py owns the models.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from app.atomic import write_atomic
from app.config import Config, ConfigError, DiffusionSection, load_config, read_raw, set_value
from app.context import ContextUse, document_instruction, fit_context
from app.model_manager import ModelManager
from app.paths import SharpenPaths, sharpen_paths
from app.reply import DraftRequest, Opener, Reply
from engines.ar_engine import AREngine, Sampling, TrimPolicy
from engines.cancel import CancelToken
from engines.diffusion.backend import TextDiffusionBackend
from engines.diffusion.engine import DiffusionEngine
from engines.diffusion.llama_backend import LlamaDiffusionBackend, LlamaDiffusionSettings
from engines.diffusion.settings import DiffusionSettings
from engines.diffusion.settled import stopping_at
from engines.diffusion.trace import TraceError
from engines.errors import EngineError
from engines.events import Event
from engines.llama_ar import LlamaAREngine, LlamaSettings
from engines.llama_load import gpu_offload_available
from engines.messages import Instruction
from engines.options import options
from engines.threads import available_cores
from models.catalogue import CatalogueEntry, ResolvedModel
from models.decoding import file_decoding
from models.errors import ModelError, UnsupportedModel
from models.hf_checkpoint import inspect_checkpoint, is_checkpoint_folder
from models.remote import RemoteSource, remote_api_key
from router.calibration import QUICK, CalibrationCancelled, CalibrationSizes, Progress, calibrate
from router.cost import DiffusionPlan
from router.policy import NoEngineAvailable, decide
from router.profile import CostProfile, DeviceClass, ModelSize, estimate_profile, load_profile, save_profile
from router.request import EngineName, Policy, QualityGap, Request, Route, approximate_tokens

# The prefix, suffix and middle tokens of a fill-in-the-middle prompt.
FIM_TOKENS = 3


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


class SharpenService:
    def __init__(self, config: Config, paths: SharpenPaths) -> None:
        self.config = config
        self.paths = paths
        self.models = ModelManager(paths, lambda: self.config)
        # One lock per engine: loading the draft model (and writing its cacheable copy, minutes for a
        # multi-GB file) never holds up a completion.
        self._ar_lock = threading.Lock()
        self._diffusion_lock = threading.Lock()
        self._sizes: dict[tuple[str, str, int, int], ModelSize | None] = {}
        self._ar_engine: AREngine | None = None
        self._diffusion_engine: DiffusionEngine | None = None

    @classmethod
    def from_environment(cls) -> SharpenService:
        paths = sharpen_paths()
        return cls(load_config(paths.config_file), paths)

    # ----- requests ------------------------------------------------------------------------------

    def complete(
        self,
        prefix: str,
        suffix: str | None = None,
        *,
        max_tokens: int | None = None,
        stop: Sequence[str] = (),
        temperature: float | None = None,
        top_p: float | None = None,
        seed: int | None = None,
        cancel: CancelToken | None = None,
        trim: TrimPolicy = "left",
    ) -> Reply:
        """Continue `prefix` (before `suffix`, where the model fills in the middle) on the AR engine."""
        tokens = self.config.complete.max_tokens if max_tokens is None else max_tokens
        sampling = self._sampling(self.config.complete.temperature, temperature, top_p, seed)
        opener = self._completion(prefix, suffix, tokens, sampling, cancel, stop=stop, trim=trim)
        return Reply(self._ar_route(tokens, "completions are AR"), opener, tokens=tokens, kind="complete")

    def chat(
        self,
        instruction: Instruction,
        *,
        max_tokens: int | None = None,
        stop: Sequence[str] = (),
        temperature: float | None = None,
        top_p: float | None = None,
        seed: int | None = None,
        cancel: CancelToken | None = None,
    ) -> Reply:
        """Answer an instruction (or a conversation) through the AR model's chat template."""
        tokens = self.config.chat.max_tokens if max_tokens is None else max_tokens
        sampling = self._sampling(
            self.config.chat.temperature, temperature, top_p, seed, self.config.chat.no_repeat_ngram
        )
        opener = self._answer(instruction, tokens, sampling, cancel, stop)
        return Reply(self._ar_route(tokens, "instructions are AR"), opener, tokens=tokens, kind="chat")

    @staticmethod
    def _sampling(
        configured: float,
        temperature: float | None,
        top_p: float | None = None,
        seed: int | None = None,
        no_repeat_ngram: int = 0,
    ) -> Sampling:
        chosen = Sampling(
            temperature=configured if temperature is None else temperature, seed=seed, no_repeat_ngram=no_repeat_ngram
        )
        return chosen if top_p is None else replace(chosen, top_p=top_p)

    def draft(self, request: DraftRequest, *, cancel: CancelToken | None = None) -> Reply:
        """A draft or a rewrite: routed (the document around the cursor counted in), its settings settled
        once, on the engine the route chose. The engine loads and runs when the reply is iterated; the
        document is fitted to the model's context then, and the reply records what was left out."""
        tokens = request.tokens or self.config.diffusion.tokens
        overrides = {name: value for name, value in request.overrides.items() if value is not None}
        settings = self.draft_settings(**overrides)
        route = self._draft_route(request, tokens, settings)
        own = CancelToken(parent=cancel)  # also stops the passes once a stop string has settled
        sampling = self._sampling(
            self.config.chat.temperature if request.asked else self.config.complete.temperature,
            overrides.get("temperature"),
            overrides.get("top_p"),
            overrides.get("seed"),
            self.config.chat.no_repeat_ngram,
        )

        def on_ar(engine: AREngine) -> Iterator[Event]:
            if not request.asked:  # what belongs at the cursor: a continuation (FIM where the model has it)
                budget = engine.context_length - tokens
                if engine.fills_middle:  # the engine keeps a quarter of its budget for the text after the cursor
                    fitted = self._fit(reply, request, budget - FIM_TOKENS, engine.count_tokens, budget // 4)
                else:  # the model sees only the text before the cursor: the rest is said to be left out
                    fitted = self._fit(reply, replace(request, after=""), budget, engine.count_tokens)
                    reply.context = replace(fitted, left_out_after=len(request.after))
                return engine.complete(
                    fitted.before, fitted.after, max_tokens=tokens, stop=request.stop,
                    sampling=sampling, cancel=cancel,
                )  # fmt: skip
            asked = request.asked
            if request.kind == "draft" and (request.before or request.after):
                # The document goes into the request: the reply is the text for the cursor. The prompt's
                # template, history and the words around the document are measured with a stand-in for it.
                framing = engine.chat_prompt_length(request.conversation(document_instruction(asked, ".", ".")))
                fitted = self._fit(reply, request, engine.context_length - tokens - framing, engine.count_tokens)
                asked = document_instruction(asked, fitted.before, fitted.after)
            return engine.chat(
                request.conversation(asked), max_tokens=tokens, stop=request.stop, sampling=sampling, cancel=cancel
            )

        def on_diffusion(engine: DiffusionEngine) -> Iterator[Event]:
            asked = request.conversation() if request.asked else ""
            prompt = len(engine.instruction_prompt(asked, chat=request.chat)) if asked else 1
            fitted = self._fit(reply, request, engine.context_length - tokens - prompt, engine.count_tokens)
            events = (
                engine.draft(
                    asked, tokens, chosen, chat=request.chat, cancel=own, before=fitted.before, after=fitted.after
                )
                if asked
                else engine.infill(fitted.before, fitted.after, tokens, chosen, cancel=own)
            )
            return stopping_at(events, request.stop, engine.backend.decode, own) if request.stop else events

        recorded = request.recorded_prompt
        if route.engine == "ar":
            reply = Reply(route, self._on_ar(on_ar), tokens=tokens, kind=request.kind, prompt=recorded)
            return reply
        # Steps the user fixed are kept; otherwise the router's K.
        chosen = settings if "steps" in overrides else self.routed_settings(route, settings)
        opener = self._on_diffusion(on_diffusion)
        reply = Reply(route, opener, tokens=tokens, settings=chosen, kind=request.kind, prompt=recorded)
        return reply

    @staticmethod
    def _fit(
        reply: Reply, request: DraftRequest, budget: int, count: Callable[[str], int], after_at_most: int | None = None
    ) -> ContextUse:
        """The document fitted to the model; the reply records it (a request without one records nothing)."""
        if not request.before and not request.after:
            return ContextUse("", "")
        reply.context = fit_context(request.before, request.after, budget, count, after_at_most=after_at_most)
        return reply.context

    def _draft_route(self, request: DraftRequest, tokens: int, settings: DiffusionSettings) -> Route:
        """The route, with the document around the cursor counted in the prompt (each diffusion pass reads
        it again) and said in the reason."""
        readable = max(0, self.config.diffusion.n_ctx - tokens)
        before = min(approximate_tokens(request.before), readable)
        after = min(approximate_tokens(request.after), max(0, readable - before))
        routing = Request(
            kind=request.kind,
            output_tokens=tokens,
            prompt_tokens=approximate_tokens(request.asked) + before,
            suffix_tokens=after,
            force_engine=request.engine,
            quality=request.quality or self.config.router.quality,
        )
        route = self.route(routing, request.policy, settings)
        reason = route.reason
        if before + after:
            reason += f"; the estimates count ~{before + after} tokens of the document around the cursor"
        return replace(route, reason=reason)

    def _completion(
        self,
        prefix: str,
        suffix: str | None,
        tokens: int,
        sampling: Sampling,
        cancel: CancelToken | None,
        *,
        stop: Sequence[str] = (),
        trim: TrimPolicy = "left",
    ) -> Opener:
        return self._on_ar(
            lambda ar: ar.complete(
                prefix, suffix, max_tokens=tokens, stop=tuple(stop), sampling=sampling, cancel=cancel, trim=trim
            )
        )

    def _answer(
        self,
        instruction: Instruction,
        tokens: int,
        sampling: Sampling,
        cancel: CancelToken | None,
        stop: Sequence[str] = (),
    ) -> Opener:
        return self._on_ar(
            lambda ar: ar.chat(instruction, max_tokens=tokens, stop=tuple(stop), sampling=sampling, cancel=cancel)
        )

    def _ar_route(self, tokens: int, reason: str) -> Route:
        return Route("ar", self.config.models.complete, {"max_tokens": tokens}, reason=reason)

    def _on_ar(self, call: Callable[[AREngine], Iterator[Event]]) -> Opener:
        def open_stream() -> tuple[Iterator[Event], AREngine]:
            engine = self.ar_engine()
            return call(engine), engine

        return open_stream

    def _on_diffusion(self, call: Callable[[DiffusionEngine], Iterator[Event]]) -> Opener:
        def open_stream() -> tuple[Iterator[Event], DiffusionEngine]:
            engine = self.diffusion_engine()
            return call(engine), engine

        return open_stream

    def draft_settings(self, **overrides: Any) -> DiffusionSettings:
        """The draft settings: the draft model's own defaults from its catalogue entry where the user set
        none in config.toml, then the configured ones, then any non-None overrides (the command line's)."""
        chosen_by_user = self._diffusion_set_by_user | {name for name, value in overrides.items() if value is not None}
        model_defaults = {name: value for name, value in self._model_decoding().items() if name not in chosen_by_user}
        if "steps" in chosen_by_user and "threshold" not in chosen_by_user:
            model_defaults.pop("threshold", None)  # fixed steps asked for: the model's threshold would ignore them
        return DiffusionSettings.taken_from(replace(self.config.diffusion, **model_defaults), **overrides)

    def _model_decoding(self) -> dict[str, Any]:
        name = self.config.models.draft.strip()
        entry = self.models.catalogue().get(name) if name else None
        if entry is None:
            return file_decoding(Path(name).expanduser()) if name else {}
        decoding: dict[str, Any] = {}
        if entry.decoding_threshold:
            decoding["threshold"] = entry.decoding_threshold
        if entry.decoding_block_length:
            decoding["block_length"] = entry.decoding_block_length
        if entry.decoding_sampler:
            decoding["sampler"] = entry.decoding_sampler
        return decoding

    @functools.cached_property
    def _diffusion_set_by_user(self) -> set[str]:
        """[diffusion] options the user chose: written in config.toml, or (a config built in code) not the
        default. Read once, as the config is: the session changes only its models."""
        try:
            written = set(read_raw(self.paths.config_file).get("diffusion", {}))
        except ConfigError:
            written = set()
        defaults = DiffusionSection()
        changed = {
            item.name
            for item in options(DiffusionSettings)
            if getattr(self.config.diffusion, item.name) != getattr(defaults, item.name)
        }
        return written | changed

    @staticmethod
    def routed_settings(route: Route, settings: DiffusionSettings) -> DiffusionSettings:
        """The settings a diffusion route runs with: the router's K (scaled by the quality preset), unless a
        confidence threshold decides the passes."""
        if settings.threshold is not None or "steps" not in route.settings:
            return settings
        return replace(settings, steps=int(route.settings["steps"]))

    # ----- engines -------------------------------------------------------------------------------

    def ar_engine(self) -> AREngine:
        """The AR engine for the configured completion model, loaded on first use (a remote model's engine
        only names the server: nothing is sent until a request)."""
        with self._ar_lock:
            if self._ar_engine is None:
                remote = self.models.remote(self.config.models.complete)
                if remote is not None:
                    self._ar_engine = self._remote_engine(remote)
                    return self._ar_engine
                model = self.models.resolve(self.config.models.complete)
                self.models.require_fit_to_load(model)
                ar = self.config.ar
                settings = LlamaSettings(
                    n_ctx=ar.n_ctx, n_threads=ar.n_threads, n_batch=ar.n_batch, n_gpu_layers=ar.n_gpu_layers
                )
                self._ar_engine = LlamaAREngine(model.path, model.name, settings)
            return self._ar_engine

    def _remote_engine(self, remote: RemoteSource) -> AREngine:
        from engines.remote_ar import RemoteAREngine  # the openai client: only for a remote model

        name = self.config.models.complete
        return RemoteAREngine(remote, name, api_key=remote_api_key(), context_length=self.config.ar.n_ctx)

    def diffusion_engine(self) -> DiffusionEngine:
        """The diffusion engine for the configured draft model, loaded on first use."""
        with self._diffusion_lock:
            if self._diffusion_engine is None:
                name = self.config.models.draft.strip()
                if not name:
                    raise NoDraftModel()
                model = self.models.resolve(name)
                self.models.require_fit_to_load(model)
                section = self.config.diffusion
                if is_checkpoint_folder(model.path):
                    self._diffusion_engine = DiffusionEngine(self._torch_backend(model), model.name)
                    return self._diffusion_engine
                settings = LlamaDiffusionSettings(
                    n_ctx=section.n_ctx,
                    n_threads=section.n_threads,
                    n_gpu_layers=self.config.ar.n_gpu_layers,
                    cache=section.cache,
                    kv_type=section.kv_type,
                )
                served = self.models.served_file(model.path)
                backend = LlamaDiffusionBackend(served.path, settings, adapter=served.adapter)
                self._diffusion_engine = DiffusionEngine(backend, model.name)
            return self._diffusion_engine

    def _torch_backend(self, model: ResolvedModel) -> TextDiffusionBackend:
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
            load=load, cache=section.cache, n_ctx=section.n_ctx, threads=section.n_threads
        )
        return TorchDiffusionBackend(folder, settings)

    # ----- routing -------------------------------------------------------------------------------

    @property
    def profile_path(self) -> Path:
        return self.paths.data_dir / "calibration.toml"

    def device_class(self) -> DeviceClass:
        return "gpu" if gpu_offload_available() and self.config.ar.n_gpu_layers != 0 else "cpu"

    def cost_profile(self) -> tuple[CostProfile, str | None]:
        """The costs the router uses, and a warning if a saved profile could not be used. Each engine's costs
        are the ones measured for the configured model; a model never measured (none saved, or the role's
        model changed since) gets costs estimated from its size."""
        saved, warning = load_profile(self.profile_path, self.device_class())
        estimate = estimate_profile(
            self.device_class(), available_cores(), self.model_size("complete"), self.model_size("draft")
        )
        if self._remote_complete():  # no size to estimate from: the default costs, under the model's name
            estimate = replace(estimate, ar=replace(estimate.ar, model=self.config.models.complete))
        ar = saved.ar if saved.calibrated and saved.ar.model == estimate.ar.model else estimate.ar
        diffusion = estimate.diffusion
        if saved.calibrated and saved.diffusion.model == estimate.diffusion.model:
            # A pass's measured cost holds whatever cache runs; how many positions a pass decodes follows
            # the cache that will run now (diffusion.cache may have changed since the calibration).
            diffusion = replace(saved.diffusion, cache=estimate.diffusion.cache)
        return replace(saved, ar=ar, diffusion=diffusion), warning

    def _remote_complete(self) -> bool:
        try:
            return self.models.remote(self.config.models.complete) is not None
        except ModelError:
            return False

    def calibrate_quickly(self, cancel: CancelToken) -> bool:
        """A short calibration of the draft model (seconds on a small one); False if it was cancelled first."""
        try:
            self.calibrate(QUICK, lambda _fraction, _label: None, cancel, only_diffusion=True)
        except CalibrationCancelled:
            return False
        return True

    def needs_calibration(self) -> bool:
        """Whether the draft model's costs are only estimated (a quick calibration would measure them)."""
        return "diffusion" in self.present_engines() and not self.cost_profile()[0].diffusion.measured

    def model_size(self, role: str) -> ModelSize | None:
        """The configured model's size, for cost estimates; None if it is missing or unreadable. Read once
        per version of the file: every route asks."""
        name = getattr(self.config.models, role).strip()
        if not name or (role == "complete" and self._remote_complete()):
            return None
        try:
            model = self.models.resolve(name)
            stat = model.path.stat()
        except (ModelError, OSError):
            return None
        key = (role, name, stat.st_size, stat.st_mtime_ns)
        if key not in self._sizes:
            self._sizes[key] = self._read_size(role, model)
        return self._sizes[key]

    def _read_size(self, role: str, model: ResolvedModel) -> ModelSize | None:
        section = self.config.diffusion
        try:
            if is_checkpoint_folder(model.path):
                checkpoint = inspect_checkpoint(model.path)
                cache = section.cache if role == "draft" else "none"
                return ModelSize(model.name, checkpoint.parameter_count, checkpoint.size_bytes, cache)
            info = self.models.gguf_info(model.path)
            cacheable = role == "draft" and self.models.served_file(model.path, write=False).cached
            cache = self.models.runnable_cache() if cacheable else "none"
            return ModelSize(model.name, info.n_parameters, info.file_size, cache)
        except ModelError:
            return None

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
            if engine == "ar" and self._remote_complete():
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
        draft model (the AR model's position counts as its own drafts, 0, unless it was measured too)."""
        if "ar" not in present or "diffusion" not in present:
            return None
        ar, draft = (self._entry(present[engine]) for engine in ("ar", "diffusion"))
        if draft is None or max(draft.drafts_position, draft.drafts_on_topic, draft.drafts_repeats) < 0:
            return None
        router = self.config.router

        def measured(entry: CatalogueEntry | None, figure: str) -> float | None:
            value = -1.0 if entry is None else float(getattr(entry, figure))
            return None if value < 0 else value

        behind = (measured(draft, "drafts_position") or 0.0) - (measured(ar, "drafts_position") or 0.0)
        return QualityGap(
            present["diffusion"],
            behind,
            router.quality_margin,
            on_topic=measured(draft, "drafts_on_topic"),
            ar_on_topic=measured(ar, "drafts_on_topic"),
            on_topic_margin=router.on_topic_margin,
            repeats=measured(draft, "drafts_repeats"),
            ar_repeats=measured(ar, "drafts_repeats"),
            repeats_margin=router.repeats_margin,
        )

    def _entry(self, name: str) -> CatalogueEntry | None:
        try:
            return self.models.resolve(name).entry
        except ModelError:
            return None

    def base_plan(self, settings: DiffusionSettings | None = None) -> DiffusionPlan:
        chosen = settings or self.draft_settings()
        return DiffusionPlan(chosen.steps, chosen.block_length, chosen.threshold, chosen.schedule)

    def route(self, request: Request, policy: Policy | None = None, base: DiffusionSettings | None = None) -> Route:
        profile, _warning = self.cost_profile()
        budget = self.config.router.latency_budget_s
        if request.latency_budget_s is None and budget > 0:
            request = replace(request, latency_budget_s=budget)
        present = self.present_engines()
        try:
            return decide(
                request,
                profile,
                present,
                self.base_plan(base),
                policy or self.config.router.policy,
                self.quality_gap(present),
            )
        except NoEngineAvailable as error:
            raise RoutingError(str(error)) from None

    def calibrate(
        self,
        sizes: CalibrationSizes,
        progress: Progress,
        cancel: CancelToken | None = None,
        *,
        only_diffusion: bool = False,
    ) -> CostProfile:
        """Measure the present engines and save the profile. `only_diffusion` measures the draft model alone
        and keeps the AR figures already saved (as the editor's background calibration does, so it never
        touches the engine ghost text uses)."""
        present = self.present_engines()
        ar = self.ar_engine() if "ar" in present and not only_diffusion else None
        diffusion = self.diffusion_engine() if "diffusion" in present else None
        profile = calibrate(self.device_class(), ar, diffusion, sizes, progress, self.draft_settings(), cancel)
        if only_diffusion:
            saved, _warning = load_profile(self.profile_path, self.device_class())
            kept = saved.ar if saved.calibrated else replace(saved.ar, measured=False)
            profile = replace(profile, ar=kept)
        try:
            save_profile(profile, self.profile_path, write_atomic)
        except OSError as error:
            raise RoutingError(
                f"{self.profile_path}: cannot save the calibration ({error.strerror or error})"
            ) from None
        return profile

    def use_model(self, role: str, name: str, *, force: bool = False) -> None:
        """Point a role ("complete" or "draft") at a model, in the config file and in this session."""
        # A missing, corrupt or wrong-kind file fails here, before the config changes.
        self.models.check(role, name, fit=not force)
        set_value(self.paths.config_file, f"models.{role}", name)
        with self._ar_lock, self._diffusion_lock:
            if role == "complete":
                self.config = replace(self.config, models=replace(self.config.models, complete=name))
                self._ar_engine = None
            else:
                self.config = replace(self.config, models=replace(self.config.models, draft=name))
                self._diffusion_engine = None

    def _quantization_for(self, model: ResolvedModel) -> str:
        chosen = self.config.diffusion.quantization
        if chosen != "auto":
            return chosen
        entry = model.entry
        if entry is not None and entry.format == "hf-safetensors" and entry.quantization in ("nf4", "int8"):
            return entry.quantization
        return "none"
