"""Measuring this machine for the router: a full calibration (`sharpen calibrate`), and the quick one the
editor runs in the background the first time a draft model is used. Saves the profile routes read."""

from __future__ import annotations

from dataclasses import replace

from app.errors import RoutingError, SharpenError
from app.orchestration.draft_settings import DraftSettings
from app.orchestration.engine_registry import EngineRegistry
from app.storage.atomic import write_atomic
from engines.cancel import CancelToken
from router.calibration import QUICK, CalibrationCancelled, CalibrationSizes, Progress, calibrate
from router.cost import pass_seconds
from router.inputs import RouteInputs
from router.profile import CostProfile, DiffusionCosts, load_profile, save_profile

# The longest estimated pass (over 256 positions) a background calibration runs by itself for: seconds.
QUICK_PASS_LIMIT_S = 1.0
QUICK_PASS_POSITIONS = 256


class Calibrations:
    def __init__(self, engines: EngineRegistry, routing: RouteInputs, draft_settings: DraftSettings) -> None:
        self.engines = engines
        self.routing = routing
        self.draft_settings = draft_settings
        self._background_failed = False

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
        present = self.routing.present_engines()
        device = self.routing.device_class()
        ar = self.engines.ar() if "ar" in present and not only_diffusion else None
        diffusion = self.engines.diffusion() if "diffusion" in present else None
        profile = calibrate(device, ar, diffusion, sizes, progress, self.draft_settings.resolve(), cancel)
        path = self.routing.profile_path
        if only_diffusion:
            saved, _warning = load_profile(path, device)
            kept = saved.ar if saved.calibrated else replace(saved.ar, measured=False)
            profile = replace(profile, ar=kept)
        try:
            save_profile(profile, path, write_atomic)
        except OSError as error:
            raise RoutingError(f"{path}: cannot save the calibration ({error.strerror or error})") from None
        return profile

    def quickly(self, cancel: CancelToken) -> bool:
        """A short calibration of the draft model (seconds on a small one); False if it was cancelled first."""
        try:
            self.calibrate(QUICK, lambda _fraction, _label: None, cancel, only_diffusion=True)
        except CalibrationCancelled:
            return False
        return True

    def needed(self) -> bool:
        """Whether the draft model's costs are only estimated (a quick calibration would measure them)."""
        return self._unmeasured_draft_costs() is not None

    def _unmeasured_draft_costs(self) -> DiffusionCosts | None:
        """The draft model's estimated costs, where it is present and not measured yet."""
        diffusion = self.routing.cost_profile()[0].diffusion
        present = "diffusion" in self.routing.present_engines()
        return diffusion if present and not diffusion.measured else None

    def in_background(self, cancel: CancelToken, *, enabled: bool) -> str | None:
        """After a diffusion draft: the first time a draft model is used, measure it (when a pass is estimated
        cheap enough to keep it short), so later routes use this machine's own costs. Returns what to tell
        the user, or None when nothing was measured. Runs in a worker."""
        diffusion = None if not enabled or self._background_failed else self._unmeasured_draft_costs()
        if diffusion is None:
            return None
        if pass_seconds(QUICK_PASS_POSITIONS, diffusion) > QUICK_PASS_LIMIT_S:
            return None  # an 8B model on a CPU: `sharpen calibrate` measures it when the user chooses
        try:
            if not self.quickly(cancel):
                return None  # a draft started first
        except SharpenError as error:
            self._background_failed = True  # not again this session: `sharpen calibrate` says why in full
            return f"could not measure this machine: {error}"
        return "measured this machine: routes now use its own costs"
