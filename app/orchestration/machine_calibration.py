"""Measuring this machine for the router: a full calibration (`sharpen calibrate`), and the quick one a
fresh install runs before its first draft, so that no route is decided on costs guessed from the models'
sizes (on the project's 2-core machines those guesses were off by 24% to 131%). Saves the profile routes read."""

from __future__ import annotations

import threading
import time
from collections.abc import Collection
from dataclasses import replace

from app.errors import RoutingError, SharpenError
from app.orchestration.draft_settings import DraftSettings
from app.orchestration.engine_registry import EngineRegistry
from app.storage.atomic import write_atomic
from engines.cancel import CancelToken
from router.cost import estimate_ar, pass_seconds
from router.cost_measurement import QUICK, CalibrationCancelled, CalibrationSizes, Progress, calibrate
from router.inputs import RouteInputs
from router.machine_load import WATCH_S, others_over, under_load
from router.profile import CostProfile, load_profile, save_profile
from router.request import EngineName

# A quick calibration runs by itself where one pass over QUICK_PASS_POSITIONS (about the most its passes decode)
# is estimated to take at most QUICK_PASS_LIMIT_S, and AR's 64-token prompt and 16 tokens at most
# QUICK_AR_LIMIT_S: seconds for the embedded models, while an 8B model on a CPU (minutes) is measured when
# the user chooses (`sharpen calibrate`).
QUICK_PASS_POSITIONS = 64
QUICK_PASS_LIMIT_S = 0.5
QUICK_AR_LIMIT_S = 2.0
# How far one finished draft moves its engine's measured costs toward what it took, in log space: a few
# drafts correct a quick calibration's error (about 20% either way on 2 shared cores), and one unusual draft
# (a busy machine) moves them little. Drafts shorter than LEARN_MIN_TOKENS say too little to learn from.
LEARNING_RATE = 0.25
LEARN_MIN_TOKENS = 16


class Calibrations:
    def __init__(self, engines: EngineRegistry, routing: RouteInputs, draft_settings: DraftSettings) -> None:
        self.engines = engines
        self.routing = routing
        self.draft_settings = draft_settings
        self._quick_failed = False
        self._saving = threading.Lock()
        self._measuring = threading.Lock()

    def calibrate(
        self,
        sizes: CalibrationSizes,
        progress: Progress,
        cancel: CancelToken | None = None,
        *,
        only: Collection[EngineName] | None = None,
    ) -> CostProfile:
        """Measure the present engines (or those of them in `only`) and save the profile; an engine not
        measured keeps the figures already saved for it."""
        present = self.routing.present_engines()
        # A draft engine on another machine is measured there: it reports its costs with its status.
        local = [engine for engine in present if engine == "ar" or self.engines.remote_drafts() is None]
        measured = [engine for engine in local if only is None or engine in only]
        device = self.routing.device_class()
        ar = self.engines.writer() if "ar" in measured else None  # the AR engine drafts run on
        diffusion = self.engines.diffusion() if "diffusion" in measured else None
        profile = calibrate(device, ar, diffusion, sizes, progress, self.draft_settings.resolve(), cancel)
        with self._saving:
            if len(measured) < len(present):
                saved, _warning = load_profile(self.routing.profile_path, device)
                if "ar" not in measured:
                    profile = replace(profile, ar=saved.ar if saved.calibrated else replace(saved.ar, measured=False))
                if "diffusion" not in measured:
                    kept = saved.diffusion if saved.calibrated else replace(saved.diffusion, measured=False)
                    profile = replace(profile, diffusion=kept)
                # Figures kept from a profile measured under load are still skewed.
                kept_loaded = saved.calibrated and saved.measured_under_load
                profile = replace(profile, measured_under_load=profile.measured_under_load or kept_loaded)
            self._save(profile)
        return profile

    def remeasure_after_load(self, cancel: CancelToken | None = None, *, enabled: bool) -> str | None:
        """At start-up (the editor's, the server's; in a worker thread, never the UI's): a saved profile measured
        under load is measured again, quickly, if the machine is idle now, rather than kept skewing every route.
        Returns what to tell the user, or None when nothing was measured."""
        if not enabled:
            return None
        saved, warning = load_profile(self.routing.profile_path, self.routing.device_class())
        if warning is not None or not saved.calibrated or not saved.measured_under_load:
            return None
        if under_load(others_over(WATCH_S)):
            return None  # still busy: the next start tries again
        with self._measuring:
            start = time.perf_counter()
            try:
                present = self.routing.present_engines()
                for engine in present:  # loaded first: loading is not measuring
                    self.engines.ar() if engine == "ar" else self.engines.diffusion()
                profile = self.calibrate(QUICK, lambda _fraction, _label: None, cancel)
            except CalibrationCancelled:
                return None
            except SharpenError as error:
                return f"could not measure this machine again ({error}): its costs were measured under load"
        if profile.measured_under_load:
            return "the machine was busy again while it was measured: its costs are measured again at the next start"
        took = time.perf_counter() - start
        return f"costs measured under load were measured again on the idle machine ({took:.1f} s)"

    def learn(self, engine: EngineName, estimated_s: float, took_s: float) -> None:
        """After a finished draft: move `engine`'s measured costs by what the draft took over what the router
        estimated for the length it wrote (LEARNING_RATE of the way, in log space). Costs that are only
        estimated, or were measured for another model than the role's, are left to the calibration."""
        size = self.routing.model_size("complete" if engine == "ar" else "draft")
        if size is None or estimated_s <= 0 or took_s <= 0:
            return
        step = (took_s / estimated_s) ** LEARNING_RATE
        with self._saving:
            saved, warning = load_profile(self.routing.profile_path, self.routing.device_class())
            if warning is not None or not saved.calibrated:
                return
            costs = saved.ar if engine == "ar" else saved.diffusion
            if not costs.measured or costs.model != size.name:
                return
            if engine == "ar":
                profile = replace(saved, ar=saved.ar.slower(step))
            else:
                profile = replace(saved, diffusion=saved.diffusion.slower(step))
            self._save(profile)

    def _save(self, profile: CostProfile) -> None:
        path = self.routing.profile_path
        try:
            save_profile(profile, path, write_atomic)
        except OSError as error:
            raise RoutingError(f"{path}: cannot save the calibration ({error.strerror or error})") from None

    def needed(self) -> list[EngineName]:
        """The present engines whose costs are only estimated and quick to measure: what a quick calibration
        before the next draft would measure."""
        gathered = self.routing.gather()  # one status call where the draft engine is on another machine
        profile, present = gathered.profile, gathered.present
        wanted: list[EngineName] = []
        local_ar = "ar" in present and self.routing.model_size("complete") is not None
        # A quick AR measurement: a 64-token prompt and 16 tokens.
        quick_ar = estimate_ar(QUICK.decode_tokens, QUICK.prompt_tokens, profile.ar).seconds
        if local_ar and not profile.ar.measured and quick_ar <= QUICK_AR_LIMIT_S:
            wanted.append("ar")
        quick_pass = pass_seconds(QUICK_PASS_POSITIONS, profile.diffusion)
        local_diffusion = "diffusion" in present and self.engines.remote_drafts() is None
        if local_diffusion and not profile.diffusion.measured and quick_pass <= QUICK_PASS_LIMIT_S:
            wanted.append("diffusion")
        return wanted

    def will_measure(self, *, enabled: bool) -> bool:
        """Whether the next draft measures this machine first (`before_draft`)."""
        return enabled and not self._quick_failed and bool(self.needed())

    def before_draft(self, cancel: CancelToken | None, *, enabled: bool) -> str | None:
        """Before a draft is routed: the first time an engine's model is used (its costs only estimated from
        its size), measure it quickly (24-30 s for the embedded models on 2 cores), so the route follows this
        machine's own costs. Returns what to tell the user, or None when nothing was measured."""
        if not self.will_measure(enabled=enabled):
            return None
        with self._measuring:  # two first requests at once (the server): the second waits, then finds it done
            wanted = [] if self._quick_failed else self.needed()
            if not wanted:
                return None
            try:
                for engine in wanted:  # loaded first: the draft needs its engine, and loading is not measuring
                    self.engines.writer() if engine == "ar" else self.engines.diffusion()
                start = time.perf_counter()
                self.calibrate(QUICK, lambda _fraction, _label: None, cancel, only=wanted)
            except CalibrationCancelled:
                return None  # the draft was cancelled: it ends at once, and the next one measures
            except SharpenError as error:
                self._quick_failed = True  # not again this session: `sharpen calibrate` says why in full
                return f"could not measure this machine ({error}): the costs are estimated from the models' sizes"
        what = " and ".join({"ar": "the AR model", "diffusion": "the draft model"}[engine] for engine in wanted)
        return f"{what} measured on this machine first ({time.perf_counter() - start:.1f} s, once)"
