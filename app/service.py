"""The one service every front end calls (the TUI, the CLI, the server): one call per intent, each returning
a Reply. It routes each request and hands it to the drafter of the engine its route chose; app/orchestration/
does the rest: the drafters settle their engine's options and lay out its prompt, the registry loads the
engines, machine_calibration.py measures this machine; and router/inputs.py gathers what routes are decided
from.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import replace

from app.domain.draft_request import DraftRequest, routing_request
from app.domain.option_engines import pinned
from app.domain.reply import Reply
from app.errors import RoutingError, SharpenError
from app.orchestration.draft_length_log import DraftLengthLog
from app.orchestration.draft_settings import DraftSettings
from app.orchestration.drafters import CANDIDATE_TEMPERATURE, ArDrafter, DiffusionDrafter, Drafter
from app.orchestration.engine_registry import EngineRegistry
from app.orchestration.machine_calibration import LEARN_MIN_TOKENS, Calibrations
from app.orchestration.model_manager import ModelManager
from app.orchestration.remote_drafter import RemoteDiffusionDrafter
from app.orchestration.remote_drafts import RemoteDrafts
from app.storage.config import Config, load_config
from app.storage.paths import SharpenPaths, sharpen_paths
from engines.ar_engine import TrimPolicy
from engines.cancel import CancelToken
from engines.diffusion.settings import DiffusionSettings
from engines.messages import Instruction
from router.inputs import RouteInputs, RoutingSetup
from router.policy import NoEngineAvailable
from router.request import DiffusionPlan, EngineName, Policy, Request, Route


class SharpenService:
    def __init__(self, config: Config, paths: SharpenPaths) -> None:
        self.paths = paths
        self.engines = EngineRegistry(paths, config)
        self.models: ModelManager = self.engines.models
        self.routing = RouteInputs(
            self.models,
            paths.data_dir / "calibration.toml",
            paths.data_dir / "draft-lengths.toml",
            self._routing_setup,
            lambda: self._remote_drafts().state(),
        )
        self.draft_settings = DraftSettings(lambda: self.config, self.models, paths.config_file)
        self.calibrations = Calibrations(self.engines, self.routing, self.draft_settings)
        self.draft_lengths = DraftLengthLog(self.routing)
        # Ghost text on the completion model; drafts, rewrites and chat on the writing model (models.write).
        self.completer = ArDrafter(self.engines.ar, lambda: self.config)
        self.ar = ArDrafter(self.engines.writer, lambda: self.config)
        diffusion = DiffusionDrafter(self.engines.diffusion)
        self.drafters: dict[EngineName, Drafter] = {"ar": self.ar, "diffusion": diffusion}
        # Drafts on another machine, where models.draft names one (sharpen:URL, openai:URL#MODEL).
        self.remote_drafter = RemoteDiffusionDrafter(self._remote_drafts, lambda: self.config.router.quality)

    @classmethod
    def from_environment(cls) -> SharpenService:
        paths = sharpen_paths()
        return cls(load_config(paths.config_file), paths)

    @property
    def config(self) -> Config:
        """The session's configuration (choosing another model changes it)."""
        return self.engines.config

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
        job = self.completer.completion(
            prefix, suffix, tokens, cancel, stop=stop, trim=trim, temperature=temperature, top_p=top_p, seed=seed
        )
        route = Route("ar", self.engines.complete_model, tokens, reason="completions are AR", rule="completion")
        return Reply(route, job, kind="complete")

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
        """Answer an instruction (or a conversation) through the writing model's chat template."""
        tokens = self.config.chat.max_tokens if max_tokens is None else max_tokens
        job = self.ar.answer(instruction, tokens, cancel, stop, temperature=temperature, top_p=top_p, seed=seed)
        route = Route("ar", self.engines.writing_model, tokens, reason="instructions are AR", rule="chat")
        return Reply(route, job, kind="chat")

    def draft(self, request: DraftRequest, *, cancel: CancelToken | None = None) -> Reply:
        """A draft or a rewrite: routed (the document around the cursor counted in), then handed to the drafter
        of the engine the route chose, which settles its own options. An option only one engine reads pins that
        engine (OptionConflict where it contradicts the engine asked for). The engine loads and runs when the reply
        is iterated; the document is fitted to the model's context then, and the reply records what was left out.
        The first draft on a fresh install measures the engines first (a few seconds; router.auto_calibrate)."""
        request = pinned(request)
        tokens = request.tokens or self.config.diffusion.tokens
        given = request.given_options
        settings = self.draft_settings.resolve(**given)
        measured = self.calibrations.before_draft(cancel, enabled=self.config.router.auto_calibrate)
        route = self._draft_route(request, tokens, self.draft_settings.plan(settings))
        if measured is not None:
            route = replace(route, reason=f"{route.reason}; {measured}")
        remote = route.engine == "diffusion" and self.engines.remote_drafts() is not None
        drafter = self.remote_drafter if remote else self.drafters[route.engine]
        job = drafter.draft(request, tokens, route, settings, cancel)
        # A draft whose passes the request fixed ran another plan than the one the router estimates.
        finished = functools.partial(self._learn, request, settings, costs="steps" not in given)
        return Reply(route, job, kind=request.kind, prompt=request.recorded_prompt, finished=finished)

    def draft_route(self, request: DraftRequest) -> Route:
        """The route `request` would get, with both engines' estimates, without running it (and without measuring
        this machine first): what the router would choose, for a writer who chose an engine themselves."""
        tokens = request.tokens or self.config.diffusion.tokens
        settings = self.draft_settings.resolve(**request.given_options)
        return self._draft_route(request, tokens, self.draft_settings.plan(settings))

    def measures_first(self) -> bool:
        """Whether the next draft measures this machine before it is routed (a few seconds, once)."""
        return self.calibrations.will_measure(enabled=self.config.router.auto_calibrate)

    def remeasure_after_load(self) -> str | None:
        """At start-up, in a worker thread: costs measured under load are measured again if the machine is idle
        now (router.auto_calibrate); what to tell the user, or None."""
        return self.calibrations.remeasure_after_load(enabled=self.config.router.auto_calibrate)

    def candidate(self, request: DraftRequest, index: int) -> DraftRequest:
        """Candidate number `index` (1 the second) of a draft: the same request, sampled, each with its seed."""
        temperature = max(float(request.overrides.get("temperature") or 0.0), CANDIDATE_TEMPERATURE)
        base_seed = request.overrides.get("seed")
        seed = (self.config.diffusion.seed if base_seed is None else int(base_seed)) + index
        return replace(request, overrides={**request.overrides, "seed": seed, "temperature": temperature})

    def route(
        self,
        request: Request,
        policy: Policy | None = None,
        plan: DiffusionPlan | None = None,
        *,
        as_asked: bool = False,
    ) -> Route:
        """The route for a request (`sharpen route`, the server's status), with the configured draft settings;
        its estimates for the length each engine is expected to write, or (`as_asked`) the length asked."""
        try:
            return self.routing.route(request, plan or self.draft_settings.plan(), policy, as_asked=as_asked)
        except NoEngineAvailable as error:
            raise RoutingError(str(error)) from None

    def use_model(self, role: str, name: str, *, force: bool = False) -> str:
        """Point a role ("complete", "write" or "draft") at a model, in the config file and in this session;
        the name stored (a found model's full name)."""
        return self.engines.use_model(role, name, force=force)

    def _draft_route(self, request: DraftRequest, tokens: int, plan: DiffusionPlan, *, as_asked: bool = False) -> Route:
        """The route, with the document around the cursor counted in the prompt and said in the reason."""
        readable = max(0, self.config.diffusion.n_ctx - tokens)
        routing, document_tokens = routing_request(request, tokens, readable, self.config.router.quality)
        route = self.route(routing, request.policy, plan, as_asked=as_asked)
        stand_in = self.models.serving("draft" if route.engine == "diffusion" else "write").note
        if stand_in:
            route = replace(route, reason=f"{stand_in}; {route.reason}")
        if not document_tokens:
            return route
        reason = f"{route.reason}; the estimates count ~{document_tokens} tokens of the document around the cursor"
        return replace(route, reason=reason)

    def estimate_as_written(self, request: DraftRequest, settings: DiffusionSettings, reply: Reply) -> float:
        """The router's estimate, in seconds, for the engine that ran `reply`, had it asked for the length the
        draft wrote (drafts end at end-of-text): the cost model's own error, without the length's."""
        assert reply.done is not None, "a finished reply"
        engine, written = reply.route.engine, max(1, reply.done.stats.generated_tokens)
        plan = self.draft_settings.plan(settings)
        route = self._draft_route(replace(request, tokens=written, engine=engine), written, plan, as_asked=True)
        return route.estimates[engine].seconds

    def _learn(self, request: DraftRequest, settings: DiffusionSettings, reply: Reply, *, costs: bool) -> None:
        """A finished draft's length to its engine's draft lengths, and (`costs`) its time against the router's
        estimate for the length it wrote to the engine's costs."""
        done = reply.done
        if done is None or done.stats.finish_reason == "cancelled":
            return
        stats, route = done.stats, reply.route
        self.draft_lengths.record(
            route.engine, request.kind, route.model, route.max_tokens, stats.generated_tokens, stats.finish_reason
        )
        retried = reply.checked is not None and reply.checked.tries > 1  # its time is several drafts'
        if not costs or retried or stats.generated_tokens < LEARN_MIN_TOKENS:
            return
        try:  # the draft is what matters: costs that cannot be read or saved now are learnt from the next
            self.calibrations.learn(route.engine, self.estimate_as_written(request, settings, reply), stats.working_s)
        except SharpenError:
            return

    def _remote_drafts(self) -> RemoteDrafts:
        remote = self.engines.remote_drafts()
        if remote is None:
            raise RoutingError("models.draft names no draft engine on another machine")
        return remote

    def _routing_setup(self) -> RoutingSetup:
        config = self.config
        return RoutingSetup(
            # Routes weigh the AR engine that serves drafts, and calibration measures that one: the writing model.
            complete_model=self.engines.writing_model,
            draft_model=self.models.serving("draft").name,
            draft_cache=config.diffusion.cache,
            gpu_layers=config.ar.n_gpu_layers,
            policy=config.router.policy,
            latency_budget_s=config.router.latency_budget_s,
            quality_margin=config.router.quality_margin,
            on_topic_margin=config.router.on_topic_margin,
            repeats_margin=config.router.repeats_margin,
            faithful_margin=config.router.faithful_margin,
        )
