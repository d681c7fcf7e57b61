"""The calibration profile: what this machine measured, saved as versioned TOML in the data dir.

Before any calibration the router uses cautious defaults for the device class. A profile that cannot
be read falls back to those defaults with a warning, never an error: routing must always work.
"""

from __future__ import annotations

import tomllib
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Literal

import tomli_w

from engines.diffusion.backend import CACHE_MODES

PROFILE_VERSION = 1
DeviceClass = Literal["cpu", "gpu"]


@dataclass(frozen=True)
class ArCosts:
    model: str = ""
    prompt_tokens_per_s: float = 300.0
    seconds_per_token: float = 0.015
    # Measured by `sharpen calibrate`, or estimated from the model's size (estimate_profile).
    measured: bool = True

    def slower(self, factor: float) -> ArCosts:
        """These costs with every time `factor` times as long."""
        return replace(
            self,
            prompt_tokens_per_s=self.prompt_tokens_per_s / factor,
            seconds_per_token=self.seconds_per_token * factor,
        )


@dataclass(frozen=True)
class DiffusionCosts:
    model: str = ""
    # One forward pass over `positions` tokens costs pass_base_s + pass_s_per_position x positions.
    pass_base_s: float = 0.01
    pass_s_per_position: float = 0.005
    # Passes threshold decoding took per draft token (1.0: one pass per token, no parallelism).
    threshold_passes_per_token: float = 1.0
    cache: str = "none"  # the engine's CacheMode
    measured: bool = True
    # A draft engine on another machine (models.draft = sharpen:URL or openai:URL#MODEL): the round trip each
    # draft adds, and for a text-only server (no passes to count) the seconds per token its drafts took.
    round_trip_s: float = 0.0
    text_only_s_per_token: float = 0.0

    def slower(self, factor: float) -> DiffusionCosts:
        """These costs with every pass `factor` times as long."""
        return replace(
            self, pass_base_s=self.pass_base_s * factor, pass_s_per_position=self.pass_s_per_position * factor
        )


@dataclass(frozen=True)
class CostProfile:
    device: DeviceClass = "cpu"
    machine: str = ""
    created: str = ""
    calibrated: bool = False
    ar: ArCosts = field(default_factory=ArCosts)
    diffusion: DiffusionCosts = field(default_factory=DiffusionCosts)
    version: int = PROFILE_VERSION


def default_profile(device: DeviceClass) -> CostProfile:
    """Cautious costs before any calibration: a 2-core CPU running a 135M model, or a consumer GPU."""
    if device == "gpu":
        return CostProfile(
            device="gpu",
            ar=ArCosts(prompt_tokens_per_s=3000.0, seconds_per_token=0.01, measured=False),
            diffusion=DiffusionCosts(
                pass_base_s=0.02, pass_s_per_position=0.0001, threshold_passes_per_token=0.5, measured=False
            ),
        )
    return CostProfile(device="cpu", ar=ArCosts(measured=False), diffusion=DiffusionCosts(measured=False))


@dataclass(frozen=True)
class ModelSize:
    """What the cost of a model's forward pass follows: its parameters and the bytes of its weights."""

    name: str
    parameters: int
    weight_bytes: int
    # The cache its passes would use (llama.cpp keeps a KV cache for the file it is served from).
    cache: str = "none"


# Sustained throughput of a forward pass per CPU core (llama.cpp, quantized weights, AVX2/AVX-512), and
# the memory bandwidth a pass reads the weights at. Measured on the project's 2-core machines
# (bench/routing.py prints estimate against measurement); a GPU's are a consumer card's, cautiously.
CPU_FLOPS_PER_CORE = 30e9
CPU_BYTES_PER_S = 8e9
GPU_FLOPS = 15e12
GPU_BYTES_PER_S = 300e9
# A pass's fixed cost besides reading the weights: llama.cpp's graph set-up and Sharpen's sampler.
PASS_OVERHEAD_S = 0.004


def estimate_profile(device: DeviceClass, cores: int, ar: ModelSize | None, diffusion: ModelSize | None) -> CostProfile:
    """Costs before calibration, from the models' sizes: a pass over P positions costs about 2 x parameters
    x P operations, plus reading the weights once; AR decodes a token by reading the weights."""
    flops = GPU_FLOPS if device == "gpu" else CPU_FLOPS_PER_CORE * max(1, cores)
    bandwidth = GPU_BYTES_PER_S if device == "gpu" else CPU_BYTES_PER_S
    defaults = default_profile(device)
    ar_costs = (
        defaults.ar
        if ar is None
        else ArCosts(
            model=ar.name,
            prompt_tokens_per_s=flops / (2 * max(1, ar.parameters)),
            seconds_per_token=ar.weight_bytes / bandwidth + PASS_OVERHEAD_S,
            measured=False,
        )
    )
    diffusion_costs = (
        defaults.diffusion
        if diffusion is None
        else DiffusionCosts(
            model=diffusion.name,
            pass_base_s=diffusion.weight_bytes / bandwidth + PASS_OVERHEAD_S,
            pass_s_per_position=2 * max(1, diffusion.parameters) / flops,
            threshold_passes_per_token=defaults.diffusion.threshold_passes_per_token,
            cache=diffusion.cache,
            measured=False,
        )
    )
    return CostProfile(device=device, ar=ar_costs, diffusion=diffusion_costs)


def render_profile(profile: CostProfile) -> str:
    return tomli_w.dumps(asdict(profile))


def save_profile(profile: CostProfile, path: Path, write: Any) -> None:
    """Serialise through `write(path, bytes)`, the caller's atomic writer."""
    write(path, render_profile(profile).encode("utf-8"))


def load_profile(path: Path, device: DeviceClass) -> tuple[CostProfile, str | None]:
    """The saved profile, or the defaults and a warning saying why it was not used."""
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return default_profile(device), None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        return default_profile(device), f"{path}: cannot read the calibration profile ({error}); using defaults"
    try:
        if raw.get("version") != PROFILE_VERSION:
            raise ValueError(f"version {raw.get('version')!r}, expected {PROFILE_VERSION}")
        profile = CostProfile(
            **{k: v for k, v in raw.items() if k not in ("ar", "diffusion")},
            ar=_section(ArCosts, raw.get("ar", {})),
            diffusion=_section(DiffusionCosts, _renamed_cache(raw.get("diffusion", {}))),
        )
    except (TypeError, ValueError) as error:
        return default_profile(device), (
            f"{path}: the calibration profile is invalid ({error}); using defaults. Run `sharpen calibrate` again"
        )
    return profile, None


def _renamed_cache(raw: dict[str, Any]) -> dict[str, Any]:
    """A profile written before the dual cache said only whether a prefix cache ran."""
    if "prefix_cache" not in raw:
        return raw
    renamed = {k: v for k, v in raw.items() if k != "prefix_cache"}
    renamed.setdefault("cache", "prefix" if raw["prefix_cache"] is True else "none")
    return renamed


def _section(cls: type, raw: dict[str, Any]) -> Any:
    known = {f.name: f.type for f in fields(cls)}
    unknown = set(raw) - set(known)
    if unknown:
        raise ValueError(f"unknown keys {sorted(unknown)}")
    for key, value in raw.items():
        expected = {"float": (int, float), "str": (str,), "bool": (bool,)}[str(known[key])]
        if not isinstance(value, expected) or (expected != (bool,) and isinstance(value, bool)):
            raise ValueError(f"{key} has the wrong type")
        if isinstance(value, int | float) and not isinstance(value, bool) and value < 0:
            raise ValueError(f"{key} is negative")
    if "cache" in raw and raw["cache"] not in CACHE_MODES:
        raise ValueError(f"cache is {raw['cache']!r}, not one of {', '.join(CACHE_MODES)}")
    return cls(**raw)
