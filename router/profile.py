"""The calibration profile: what this machine measured, saved as versioned TOML in the data dir.

Before any calibration the router uses cautious defaults for the device class. A profile that cannot
be read falls back to those defaults with a warning, never an error: routing must always work.
"""

from __future__ import annotations

import tomllib
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Literal

import tomli_w

PROFILE_VERSION = 1
DeviceClass = Literal["cpu", "gpu"]


@dataclass(frozen=True)
class ArCosts:
    model: str = ""
    prompt_tokens_per_s: float = 300.0
    seconds_per_token: float = 0.015


@dataclass(frozen=True)
class DiffusionCosts:
    model: str = ""
    # One forward pass over `positions` tokens costs pass_base_s + pass_s_per_position x positions.
    pass_base_s: float = 0.01
    pass_s_per_position: float = 0.005
    # Passes threshold decoding took per draft token (1.0: one pass per token, no parallelism).
    threshold_passes_per_token: float = 1.0
    prefix_cache: bool = False


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
            ar=ArCosts(prompt_tokens_per_s=3000.0, seconds_per_token=0.01),
            diffusion=DiffusionCosts(pass_base_s=0.02, pass_s_per_position=0.0001, threshold_passes_per_token=0.5),
        )
    return CostProfile(device="cpu")


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
            diffusion=_section(DiffusionCosts, raw.get("diffusion", {})),
        )
    except (TypeError, ValueError) as error:
        return default_profile(device), (
            f"{path}: the calibration profile is invalid ({error}); using defaults. Run `sharpen calibrate` again"
        )
    return profile, None


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
    return cls(**raw)
