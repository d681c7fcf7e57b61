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
from models.tensor_mix import TensorMix
from router.kernel_costs import ModelWork, named_table

PROFILE_VERSION = 1
DeviceClass = Literal["cpu", "gpu"]


@dataclass(frozen=True)
class ArCosts:
    model: str = ""
    prompt_tokens_per_s: float = 300.0
    # A token's time grows with the context it attends to: seconds_per_token with nothing before it, plus
    # seconds_per_context_token for each position before it. A profile written before the two were measured
    # apart holds 0 for the second (its seconds_per_token was taken after a 256-token prompt).
    seconds_per_token: float = 0.015
    seconds_per_context_token: float = 0.0
    # Measured by `sharpen calibrate`, or estimated from the model's size (estimate_profile, or scaled_ar from
    # another model's measurement: `scaled_from` names it).
    measured: bool = True
    # The model's work per pass (router/kernel_costs.py): what another model's costs are scaled by.
    decode_work: float = 0.0
    row_work: float = 0.0
    vocab: int = 0
    context_work: float = 0.0
    # The kernel table (router/kernel_costs.py) the works were counted with: another model's are counted alike.
    kernels: str = ""
    scaled_from: str = ""

    def token_seconds(self, context: float) -> float:
        """One token's time after `context` positions."""
        return self.seconds_per_token + self.seconds_per_context_token * context

    def slower(self, factor: float) -> ArCosts:
        """These costs with every time `factor` times as long."""
        return replace(
            self,
            prompt_tokens_per_s=self.prompt_tokens_per_s / factor,
            seconds_per_token=self.seconds_per_token * factor,
            seconds_per_context_token=self.seconds_per_context_token * factor,
        )


@dataclass(frozen=True)
class DiffusionCosts:
    model: str = ""
    # One forward pass over `positions` tokens costs pass_base_s + pass_s_per_position x positions; a pass
    # against cached keys and values (the block cache's) adds, for each position of that context,
    # pass_s_per_context + pass_s_per_row_context x positions (0 in a profile written before they were
    # measured apart, whose line was taken after a 128-token context).
    pass_base_s: float = 0.01
    pass_s_per_position: float = 0.005
    pass_s_per_context: float = 0.0
    pass_s_per_row_context: float = 0.0
    # Passes threshold decoding took per draft token (1.0: one pass per token, no parallelism).
    threshold_passes_per_token: float = 1.0
    cache: str = "none"  # the engine's CacheMode
    measured: bool = True
    # The sampler's own time (Python and numpy, besides the forward pass) per row of logits a pass reads: it
    # follows the vocabulary, which is 3x the embedded models' in Qwen's.
    sampler_s_per_row: float = 0.0
    # Rows a cached pass (prefix, dual) decodes before its window: 1 where the model's logits are shifted
    # (Dream, Fast-dLLM v2), its window's first prediction read from the row before it.
    shift_rows: int = 0
    decode_work: float = 0.0
    row_work: float = 0.0
    vocab: int = 0
    context_work: float = 0.0
    # What a pass's fixed part (pass_base_s) follows (router/kernel_costs.py); 0 in a profile written before it
    # was counted apart from one row's work, which stands in for it.
    batch_work: float = 0.0
    # A pulled model's matrices that run through the tiled kernels from TILED_FROM rows
    # (router/kernel_costs.py): their share of pass_base_s and pass_s_per_position (what they cost below it),
    # and from it on, each window's unpacking and each row of a whole tile. 0 for a measured model, whose
    # line holds them.
    tiled_base_s: float = 0.0
    tiled_s_per_position: float = 0.0
    unpack_s: float = 0.0
    tiled_s_per_tile_row: float = 0.0
    kernels: str = ""  # as ArCosts.kernels
    scaled_from: str = ""
    # A draft engine on another machine (models.draft = sharpen:URL or openai:URL#MODEL): the round trip each
    # draft adds, and for a text-only server (no passes to count) the seconds per token its drafts took.
    round_trip_s: float = 0.0
    text_only_s_per_token: float = 0.0

    def slower(self, factor: float) -> DiffusionCosts:
        """These costs with every pass `factor` times as long."""
        return replace(
            self,
            pass_base_s=self.pass_base_s * factor,
            pass_s_per_position=self.pass_s_per_position * factor,
            pass_s_per_context=self.pass_s_per_context * factor,
            pass_s_per_row_context=self.pass_s_per_row_context * factor,
            sampler_s_per_row=self.sampler_s_per_row * factor,
            tiled_base_s=self.tiled_base_s * factor,
            tiled_s_per_position=self.tiled_s_per_position * factor,
            unpack_s=self.unpack_s * factor,
            tiled_s_per_tile_row=self.tiled_s_per_tile_row * factor,
        )


@dataclass(frozen=True)
class MeasuredLoad:
    """How busy other processes kept the CPU around a calibration (router/machine_load.py): cores, on average,
    over a moment before it and while it measured, of the cores this process may use."""

    cores: int = 0
    others_before: float = 0.0
    others_during: float = 0.0


@dataclass(frozen=True)
class CostProfile:
    device: DeviceClass = "cpu"
    machine: str = ""
    created: str = ""
    calibrated: bool = False
    # Other processes kept the CPU busy before or during the measurement (router/machine_load.py BUSY_SHARE):
    # the costs read high, and the next start on an idle machine measures them again.
    measured_under_load: bool = False
    load: MeasuredLoad = field(default_factory=MeasuredLoad)
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
    # Its matrices by weight type, what its work per pass is counted from (a GGUF's; None for a checkpoint
    # folder).
    mix: TensorMix | None = None
    shift_rows: int = 0  # as DiffusionCosts.shift_rows

    def work(self, kernels: str) -> ModelWork | None:
        """Its work by the named kernel table (router/kernel_costs.py), None where its mix is unknown."""
        return None if self.mix is None else named_table(kernels).work(self.mix)


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


def scaled_ar(measured: ArCosts, target: ModelSize) -> ArCosts | None:
    """`target`'s AR costs from another model's measured ones, by their work (router/kernel_costs.py): a token
    is a one-row pass, a prompt's tokens further rows of a long batch, a token's attention to its context
    follows the layers' width. None where either model's work is unknown."""
    work = target.work(measured.kernels)
    if work is None or not measured.measured or min(measured.decode_work, measured.row_work, work.row) <= 0:
        return None
    return ArCosts(
        model=target.name,
        prompt_tokens_per_s=measured.prompt_tokens_per_s * measured.row_work / work.prompt_row,
        seconds_per_token=measured.seconds_per_token * work.decode / measured.decode_work,
        seconds_per_context_token=_per_context(measured.seconds_per_context_token, measured.context_work, work),
        measured=False,
        decode_work=work.decode,
        row_work=work.row,
        vocab=work.vocab,
        context_work=work.context,
        kernels=measured.kernels,
        scaled_from=measured.model,
    )


def _per_context(seconds: float, measured_work: float, target: ModelWork) -> float:
    """A cost per position of context, carried to `target` by the layers' width (0 where either is unknown)."""
    return seconds * target.context / measured_work if measured_work > 0 and target.context > 0 else 0.0


def scaled_diffusion(measured: DiffusionCosts, target: ModelSize, device: DeviceClass) -> DiffusionCosts | None:
    """`target`'s diffusion costs from another model's measured ones: a pass's fixed part by a batched pass's
    fixed work, its cost per position by each further row's, its cost per position of context by the layers'
    width, the sampler's by the vocabulary. Passes per token under a threshold are the model's own, so the
    device's default. None where either model's work is unknown."""
    work = target.work(measured.kernels)
    if work is None or not measured.measured or min(measured.decode_work, measured.row_work, work.row) <= 0:
        return None
    vocab_ratio = work.vocab / measured.vocab if measured.vocab > 0 and work.vocab > 0 else 1.0
    fixed = (
        work.batch / measured.batch_work
        if measured.batch_work > 0 and work.batch > 0
        else work.decode / measured.decode_work
    )
    base = measured.pass_base_s * fixed
    # Seconds per unit of a batched pass's fixed work, and per unit of a further row's work.
    per_fixed = base / work.batch if work.batch > 0 else 0.0
    per_row = measured.pass_s_per_position / measured.row_work
    return DiffusionCosts(
        model=target.name,
        pass_base_s=base,
        pass_s_per_position=per_row * work.row,
        pass_s_per_context=_per_context(measured.pass_s_per_context, measured.context_work, work),
        pass_s_per_row_context=_per_context(measured.pass_s_per_row_context, measured.context_work, work),
        threshold_passes_per_token=default_profile(device).diffusion.threshold_passes_per_token,
        cache=target.cache,
        measured=False,
        sampler_s_per_row=measured.sampler_s_per_row * vocab_ratio,
        shift_rows=target.shift_rows,
        decode_work=work.decode,
        row_work=work.row,
        vocab=work.vocab,
        context_work=work.context,
        batch_work=work.batch,
        tiled_base_s=per_fixed * work.tiled_batch,
        tiled_s_per_position=per_row * work.tiled_row,
        unpack_s=per_fixed * work.unpack,
        tiled_s_per_tile_row=per_row * work.tile_row,
        kernels=measured.kernels,
        scaled_from=measured.model,
    )


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
        if not isinstance(raw.get("measured_under_load", False), bool):
            raise ValueError("measured_under_load is not true or false")
        profile = CostProfile(
            **{k: v for k, v in raw.items() if k not in ("ar", "diffusion", "load")},
            load=_section(MeasuredLoad, raw.get("load", {})),
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
        expected = {"float": (int, float), "int": (int,), "str": (str,), "bool": (bool,)}[str(known[key])]
        if not isinstance(value, expected) or (expected != (bool,) and isinstance(value, bool)):
            raise ValueError(f"{key} has the wrong type")
        if isinstance(value, int | float) and not isinstance(value, bool) and value < 0:
            raise ValueError(f"{key} is negative")
    if "cache" in raw and raw["cache"] not in CACHE_MODES:
        raise ValueError(f"cache is {raw['cache']!r}, not one of {', '.join(CACHE_MODES)}")
    return cls(**raw)
