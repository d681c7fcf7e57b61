"""The checks `sharpen doctor` makes: the build, the CPU, the optional packages, the config, the models, the
calibration and the threads, each a Finding (report.py). Checks never raise: a check that cannot run is itself a
finding."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from app.doctor.gpu import check_this_gpu
from app.doctor.report import Finding, Report, Status
from app.doctor.stores import check_stores
from app.orchestration.model_records import size_on_disk
from app.orchestration.remote_drafts import RemoteDrafts
from app.service import SharpenService
from app.storage.config import Config, ConfigError, ModelsSection, load_config
from app.storage.paths import SharpenPaths, sharpen_paths
from engines.cpu_info import CpuInfo, cpu_info
from engines.diffusion.llama_backend import NO_DUAL_CACHE, fills_gaps
from engines.llama_build import (
    NO_AMX_FLAGS,
    BuildInfo,
    amx_in_use,
    batched_decode_crashes,
    build_info,
    build_problems,
)
from engines.threads import YIELD_AT_CORES, CpuLoad, auto_threads, available_cores
from models.catalogue import resolve_model
from models.errors import ModelError, ModelFileError, UnknownModel
from models.fit import GIB, check_fit, this_machine
from models.remote import RemoteSource, remote_api_key
from router.profile import load_profile

# The checkout this runs from, where Sharpen runs from one (scripts/bootstrap builds its llama.cpp).
CHECKOUT = Path(__file__).resolve().parents[2]
BOOTSTRAP = CHECKOUT / "scripts" / "bootstrap"
# A cacheable draft file small enough to load in a moment, for the dual-cache probe.
PROBE_MODEL = "sharpen-draft-mini"
# Quantized weights, which ggml's AMX kernels serve: the AMX probe's model.
AMX_PROBE_MODEL = "smollm2-135m-instruct"


def rebuild_command(version: str) -> str:
    """The one command that rebuilds llama-cpp-python for this machine, in the environment doctor runs in."""
    if BOOTSTRAP.is_file() and Path(sys.prefix).resolve() == (CHECKOUT / ".venv").resolve():
        return f"{BOOTSTRAP} (rebuilds llama-cpp-python for this machine, with scripts/llama-cpp-patches)"
    cmake_args = os.environ.get("CMAKE_ARGS", "")
    keep = f'CMAKE_ARGS="{cmake_args}" ' if cmake_args else ""
    return (
        f'{keep}CFLAGS="{NO_AMX_FLAGS}" CXXFLAGS="{NO_AMX_FLAGS}" {sys.executable} -m pip install --no-cache-dir '
        f"--no-binary llama-cpp-python --force-reinstall --no-deps llama-cpp-python=={version}"
    )


def check_versions() -> Finding:
    facts = {
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "sharpen": importlib.metadata.version("sharpen"),
        "platform": platform.platform(),
        "executable": sys.executable,
    }
    return Finding(
        "versions", "ok", f"Sharpen {facts['sharpen']}, Python {facts['python']}, {facts['platform']}", "", facts
    )


def amx_crashes(build: BuildInfo, cpu: CpuInfo) -> bool | None:
    """Whether this build's AMX kernels crash on a batched decode (None: they are not in use, or there is no
    quantized model to probe with)."""
    if not amx_in_use(build, cpu):
        return None
    try:
        model = resolve_model(AMX_PROBE_MODEL).path
    except ModelError:
        return None
    return batched_decode_crashes(model)


def check_build(build: BuildInfo, cpu: CpuInfo, amx_probe: bool | None = None) -> list[Finding]:
    """`amx_probe`: what `amx_crashes` found (None where nothing was probed)."""
    offload = "GPU offload available" if build.gpu_offload else "no GPU offload (a CPU build)"
    facts = {"version": build.version, "system_info": build.system_info, "gpu_offload": build.gpu_offload}
    findings = [
        Finding("llama.cpp", "ok", f"llama-cpp-python {build.version}, {offload}; {build.system_info}", "", facts)
    ]
    cpu_facts = {
        "model": cpu.model,
        "machine": cpu.machine,
        "features": sorted(cpu.features),
        "build_features": sorted(build.features),
        "amx_kernels": "not in use" if amx_probe is None else ("crash" if amx_probe else "run"),
    }
    problems = build_problems(build, cpu, amx_crashes=bool(amx_probe))
    vector = ", ".join(f for f in ("AVX2", "AVX512", "AMX_INT8") if f in cpu.features) or ", ".join(
        sorted(cpu.features)
    )
    if not problems:
        verdict = "the build matches" if cpu.flags else "no CPU flags to compare the build with"
        if amx_probe is False:
            verdict += " and its AMX kernels ran a batched decode"
        findings.append(
            Finding("cpu", "ok", f"{cpu.model or cpu.machine}: {vector or cpu.machine}; {verdict}", "", cpu_facts)
        )
    for problem in problems:
        status: Status = "fail" if problem.fatal else "warn"
        fix = rebuild_command(build.version)
        findings.append(
            Finding("cpu", status, f"{cpu.model or cpu.machine} ({vector}): {problem.message}", fix, cpu_facts)
        )
    return findings


def check_dual_cache(config: Config) -> Finding:
    """Whether this llama.cpp build runs the dual cache: the backend's own probe, on the small drafter that
    ships with Sharpen (an 11 MB file, whatever model is set)."""
    available = fills_gaps(resolve_model(PROBE_MODEL).path)
    facts = {"dual_cache": available, "diffusion.cache": config.diffusion.cache}
    if available:
        detail = "this llama.cpp decodes a block between cached positions (scripts/llama-cpp-patches)"
        return Finding("dual cache", "ok", f"{detail}; diffusion.cache is {config.diffusion.cache}", "", facts)
    if BOOTSTRAP.is_file() and Path(sys.prefix).resolve() == (CHECKOUT / ".venv").resolve():
        fix = f"{BOOTSTRAP} (builds llama-cpp-python with the patches in scripts/llama-cpp-patches)"
    else:
        fix = "build llama-cpp-python with scripts/llama-cpp-wheel from a Sharpen checkout (it applies the patches)"
    return Finding("dual cache", "warn", NO_DUAL_CACHE, fix, facts)


def check_optional_packages() -> Finding:
    facts: dict[str, Any] = {}
    for name in ("torch", "accelerate", "bitsandbytes"):
        try:
            facts[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            facts[name] = None
    if facts["torch"] is None:
        return Finding(
            "torch",
            "ok",
            "not installed: Hugging Face checkpoint folders cannot be drafts (GGUF drafts need no torch)",
            "pip install -e '.[torch]'",
            facts,
        )
    import torch  # only here: doctor is the one command that asks torch about CUDA

    facts["cuda"] = torch.version.cuda
    facts["cuda_available"] = bool(torch.cuda.is_available())
    facts["devices"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    facts["mkldnn"] = bool(torch.backends.mkldnn.is_available())
    device = ", ".join(facts["devices"]) if facts["devices"] else "CPU only"
    extras = ", ".join(f"{name} {facts[name]}" for name in ("accelerate", "bitsandbytes") if facts[name])
    return Finding("torch", "ok", f"torch {facts['torch']} ({device}){'; ' + extras if extras else ''}", "", facts)


def check_config(paths: SharpenPaths) -> tuple[Finding, Config]:
    path = paths.config_file
    facts = {"path": str(path), "exists": path.is_file()}
    try:
        config = load_config(path)
    except ConfigError as error:
        return Finding(
            "config",
            "fail",
            str(error),
            f"mv {path} {path}.bad  (keeps your file; every setting back to its default), or fix the key it names",
            facts,
        ), Config()
    detail = f"{path} is valid" if path.is_file() else f"no file at {path}: every setting is its default"
    return Finding("config", "ok", detail, "", facts), config


def _use_default(role: str) -> str:
    """The command that puts a role back on its embedded model, which is always present and small (writing:
    back on the complete model)."""
    default = getattr(ModelsSection(), role)
    if not default:
        return f'sharpen config set models.{role} ""'
    return f"sharpen models use {default} --for {role}"


def check_remote_model(check: str, remote: RemoteSource) -> Finding:
    """Whether the server answers and lists the model (what OpenAI's API can tell)."""
    import openai

    facts: dict[str, object] = {"base_url": remote.base_url, "model": remote.model}
    client = openai.OpenAI(base_url=remote.base_url, api_key=remote_api_key(), timeout=5.0, max_retries=0)
    try:
        listed = [model.id for model in client.models.list()]
    except openai.APIError as error:
        fix = "start the server, or point models.complete at a local model"
        return Finding(check, "fail", f"{remote.label}: the server does not answer ({error})", fix, facts)
    if remote.model not in listed:
        shown = ", ".join(listed[:8]) or "none"
        return Finding(check, "fail", f"{remote.label}: the server lists no such model (it has {shown})", "", facts)
    return Finding(check, "ok", f"{remote.label}: answers and lists the model", "", facts)


def check_remote_drafts(check: str, remote: RemoteDrafts) -> Finding:
    """Whether the remote draft engine answers, what drafts there, and whether its drafts animate."""
    state = remote.state()
    facts: dict[str, object] = {"base_url": remote.source.base_url, "kind": remote.source.kind, "model": state.model}
    if state.down:
        return Finding(check, "warn", f"{state.down}; drafts go to this machine's engines", "start it", facts)
    shown = "passes animate" if remote.animated else "text only, not animated"
    trip = f"{state.costs.round_trip_s * 1000:.0f} ms round trip"
    return Finding(check, "ok", f"{state.model}: answers ({trip}; {shown})", "", facts)


def check_model(service: SharpenService, role: str, name: str) -> Finding:
    check = f"models.{role}"
    if role == "write" and not name.strip():
        complete = service.config.models.complete
        name = service.engines.writing_model
        if name == complete:
            return Finding(check, "ok", f"none set: the complete model ({complete}) answers drafts, rewrites and chat")
    if not name.strip():
        return Finding(
            check,
            "warn",
            "none configured: drafts stream from the AR model",
            "sharpen models use sharpen-draft --for draft",
        )
    remote_drafts = service.engines.remote_drafts() if role == "draft" else None
    if remote_drafts is not None:
        return check_remote_drafts(check, remote_drafts)
    stand_in = service.models.serving(role)
    if stand_in.note:
        return Finding(check, "warn", stand_in.note, f"sharpen models use NAME --for {role}  (`sharpen models list`)")
    try:
        remote = service.models.remote(name)
        if remote is not None:
            service.models.check(role, name, fit=False)
            return check_remote_model(check, remote)
        model = service.models.check(role, name, fit=False)
    except UnknownModel as error:
        return Finding(check, "fail" if role != "draft" else "warn", str(error), _use_default(role))
    except ModelFileError as error:
        status: Status = "fail" if role != "draft" else "warn"
        fix = error.hint or _use_default(role)
        return Finding(check, status, f"{error.path}: {error.problem}", fix)
    except (ModelError, ConfigError) as error:
        return Finding(check, "fail" if role != "draft" else "warn", str(error), _use_default(role))
    path = model.path
    size = size_on_disk(path)
    facts: dict[str, object] = {"name": model.name, "path": str(path), "bytes": size}
    uncached = ""  # why a draft model runs without a cache: a warning once the fit is checked
    adapted = ""  # how an AR adapter is served, said with the model
    if role != "draft" and path.is_file():
        served_ar = service.models.served_ar(path, write=False)
        if served_ar.note:
            facts["served"] = served_ar.note
            adapted = f"; {served_ar.note}"
    if role == "draft" and path.is_file():
        served = service.models.served_file(path, write=False)
        facts["cache"] = service.models.runnable_cache() if served.cached else "none"
        if served.note:
            facts["served"] = served.note
        uncached = "" if served.cached else served.note
    machine = this_machine()
    if model.entry is not None:
        verdict = check_fit(model.entry, machine)
        if not verdict.fits:
            # Drafts fall back to AR, and with models.check_fit off the user chose to load it anyway.
            status = "fail" if role != "draft" and service.config.models.check_fit else "warn"
            return Finding(check, status, verdict.reason, _use_default(role), facts)
        if uncached:
            return Finding(check, "warn", f"{model.name}: {verdict.reason}; {uncached}", "", facts)
        detail = f"{model.name}: {path} ({size / 1e6:.0f} MB), {verdict.reason}{adapted}"
        return Finding(check, "ok", detail, "", facts)
    if size > machine.ram_available:
        return Finding(
            check,
            "warn",
            f"{path} is {size / GIB:.1f} GiB and {machine.ram_available / GIB:.1f} GiB of RAM is available",
            _use_default(role),
            facts,
        )
    if uncached:
        return Finding(check, "warn", f"{path} ({size / 1e6:.0f} MB): {uncached}", "", facts)
    return Finding(check, "ok", f"{path} ({size / 1e6:.0f} MB), readable{adapted}", "", facts)


def check_profile(service: SharpenService) -> Finding:
    path = service.routing.profile_path
    profile, warning = load_profile(path, service.routing.device_class())
    facts = {"path": str(path), "calibrated": profile.calibrated, "created": profile.created}
    if warning:
        return Finding("calibration", "warn", warning, "sharpen calibrate", facts)
    lengths_warning = service.routing.draft_lengths()[1]
    if lengths_warning:  # the next draft replaces the file
        return Finding("calibration", "warn", lengths_warning, "", facts)
    if not profile.calibrated:
        return Finding(
            "calibration", "warn", "not calibrated: the router estimates with default costs", "sharpen calibrate", facts
        )
    models = service.config.models
    stale = [
        f"{role} was measured on {measured!r}, now {configured!r}"
        for role, measured, configured in (
            ("write", profile.ar.model, service.engines.writing_model),
            ("draft", profile.diffusion.model, models.draft),
        )
        if configured.strip() and measured != _model_name(service, configured)
    ]
    if stale:
        return Finding("calibration", "warn", f"stale: {'; '.join(stale)}", "sharpen calibrate", facts)
    return Finding("calibration", "ok", f"{path}, measured {profile.created} for the configured models", "", facts)


def check_threads(config: Config, sample_s: float = 0.5) -> Finding:
    """The thread counts in effect now, and whether other work keeps the CPU busy."""
    load = CpuLoad(background=False)
    time.sleep(sample_s)
    load.sample(smooth=False)
    others, cores = load.others(), available_cores()
    chosen = auto_threads(cores, others)
    waiting = {name: os.environ.get(name) for name in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "OMP_NUM_THREADS")}
    facts = {
        "cores": cores,
        "busy_cores_other_work": round(others, 2),
        "auto_threads_now": chosen,
        "ar.n_threads": config.ar.n_threads,
        "diffusion.n_threads": config.diffusion.n_threads,
        "load_measured": load.supported,
        **{name: value for name, value in waiting.items() if value is not None},
    }
    configured = {"ar.n_threads": config.ar.n_threads, "diffusion.n_threads": config.diffusion.n_threads}
    settings = "; ".join(
        f"{key} = {value} ({'auto: ' + str(chosen) + ' now' if value == 0 else 'fixed'})"
        for key, value in configured.items()
    )
    detail = f"{cores} cores; other work keeps {others:.1f} busy; {settings}"
    over = [key for key, value in configured.items() if value > cores]
    if over:
        return Finding(
            "threads",
            "warn",
            f"{detail}: {over[0]} is more than the {cores} cores, so threads wait on each other",
            f"sharpen config set {over[0]} 0",
            facts,
        )
    if others >= 1 - YIELD_AT_CORES:
        return Finding(
            "threads",
            "warn",
            f"{detail}: the machine is busy, so completions and drafts run on {chosen} thread(s) and are slower",
            "`top -o %CPU` shows what keeps the CPU busy",
            facts,
        )
    return Finding("threads", "ok", detail, "", facts)


def _model_name(service: SharpenService, name: str) -> str:
    try:
        if service.models.remote(name) is not None:
            return name
        return service.models.resolve(name).name
    except ModelError:
        return name


def _check_this_build() -> list[Finding]:
    build, cpu = build_info(), cpu_info()
    return check_build(build, cpu, amx_crashes(build, cpu))


def _guarded(check: str, run: Callable[[], Finding | list[Finding]], *, vital: bool = False) -> list[Finding]:
    try:
        result = run()
    except Exception as error:  # a check that cannot run is itself worth reporting
        status: Status = "fail" if vital else "warn"
        return [Finding(check, status, f"could not check: {type(error).__name__}: {error}")]
    return result if isinstance(result, list) else [result]


def diagnose(paths: SharpenPaths | None = None) -> Report:
    paths = paths or sharpen_paths()
    findings = _guarded("versions", check_versions)
    findings += _guarded("llama.cpp", _check_this_build, vital=True)
    findings += _guarded("torch", check_optional_packages)
    config_finding, config = check_config(paths)
    findings.append(config_finding)
    findings += _guarded("gpu", lambda: check_this_gpu(config.ar.n_gpu_layers))
    findings += _guarded("dual cache", lambda: check_dual_cache(config))
    service = SharpenService(config, paths)
    findings += _guarded(
        "models.complete", lambda: check_model(service, "complete", config.models.complete), vital=True
    )
    findings += _guarded("models.write", lambda: check_model(service, "write", config.models.write))
    findings += _guarded("models.draft", lambda: check_model(service, "draft", config.models.draft))
    findings += _guarded("stores", lambda: check_stores(service.models))
    findings += _guarded("calibration", lambda: check_profile(service))
    findings += _guarded("threads", lambda: check_threads(config))
    return Report(findings)
