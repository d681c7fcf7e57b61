"""`sharpen doctor`: the build, the CPU, the models, the calibration and the config, each problem with its fix."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

import app.doctor.checks
from app.cli import main
from app.doctor.checks import amx_crashes, check_build, check_threads, rebuild_command
from app.storage.atomic import write_atomic
from app.storage.config import Config
from engines.cpu_info import CpuInfo, cpu_info
from engines.llama_build import NO_AMX_FLAGS, BuildInfo, amx_in_use, build_info, parse_features
from engines.threads import available_cores
from router.profile import ArCosts, CostProfile, DiffusionCosts, save_profile


def _doctor(capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, dict[str, object]]]:
    code = main(["doctor", "--json"])
    report = json.loads(capsys.readouterr().out)
    return code, {f["check"]: f for f in report["findings"]}


def test_a_fresh_install_is_ready(capsys: pytest.CaptureFixture[str]) -> None:
    code, findings = _doctor(capsys)
    assert code == 0
    assert {"versions", "llama.cpp", "cpu", "torch", "config", "models.complete", "models.draft", "calibration"} <= set(
        findings
    )
    build = findings["llama.cpp"]["facts"]
    assert isinstance(build, dict) and build["system_info"] == build_info().system_info
    assert findings["models.complete"]["status"] == "ok" and findings["models.draft"]["status"] == "ok"
    assert findings["cpu"]["status"] == "ok"
    dual = findings["dual cache"]
    assert dual["status"] == "ok" and dual["facts"] == {"dual_cache": True, "diffusion.cache": "dual"}
    assert findings["calibration"]["status"] == "warn" and findings["calibration"]["fix"] == "sharpen calibrate"
    threads = findings["threads"]["facts"]
    assert isinstance(threads, dict) and threads["ar.n_threads"] == 0 and 1 <= threads["auto_threads_now"] <= 64


def test_the_text_report_names_each_fix(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert "WARN  calibration" in out and "fix: sharpen calibrate" in out and "sharpen doctor: ready" in out


def test_an_invalid_config_fails_with_its_key(sharpen_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = sharpen_home / "config" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text("[ar]\nn_ctx = 'big'\n")
    code, findings = _doctor(capsys)
    assert code == 1
    assert findings["config"]["status"] == "fail" and "ar.n_ctx" in str(findings["config"]["detail"])
    assert str(config) in str(findings["config"]["fix"])


def test_a_missing_completion_model_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "set", "models.complete", str(tmp_path / "gone.gguf")]) == 0
    capsys.readouterr()
    code, findings = _doctor(capsys)
    assert code == 1 and findings["models.complete"]["status"] == "fail"
    assert "gone.gguf" in str(findings["models.complete"]["detail"])


def test_a_draft_model_of_the_wrong_kind_warns(embedded_model_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "set", "models.draft", str(embedded_model_path)]) == 0
    capsys.readouterr()
    code, findings = _doctor(capsys)
    assert code == 0, "drafts still work, from the AR model"
    assert findings["models.draft"]["status"] == "warn" and "not a diffusion model" in str(
        findings["models.draft"]["detail"]
    )


def test_a_profile_measured_for_other_models_is_stale(sharpen_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    profile = CostProfile(
        calibrated=True,
        created="2026-01-01T00:00:00+00:00",
        ar=ArCosts(model="another-model"),
        diffusion=DiffusionCosts(),
    )
    save_profile(profile, sharpen_home / "data" / "calibration.toml", write_atomic)
    _code, findings = _doctor(capsys)
    calibration = findings["calibration"]
    assert calibration["status"] == "warn" and "another-model" in str(calibration["detail"])
    assert calibration["fix"] == "sharpen calibrate"
    current = CostProfile(
        calibrated=True,
        created="2026-01-01T00:00:00+00:00",
        ar=ArCosts(model="sharpen-write"),
        diffusion=DiffusionCosts(model="sharpen-draft"),
    )
    save_profile(current, sharpen_home / "data" / "calibration.toml", write_atomic)
    _code, findings = _doctor(capsys)
    assert findings["calibration"]["status"] == "ok"


def test_an_amx_build_fails_with_the_rebuild_command_only_where_its_kernels_crash() -> None:
    info = "CPU : AVX = 1 | AVX2 = 1 | AVX512 = 1 | AMX_INT8 = 1 | OPENMP = 1 |"
    build = BuildInfo("0.3.36", info, parse_features(info), gpu_offload=False)
    cpu = CpuInfo("Intel Xeon", "x86_64", "Linux", frozenset({"avx", "avx2", "avx512f", "amx_tile", "amx_int8"}))
    failed = [f for f in check_build(build, cpu, amx_probe=True) if f.status == "fail"]
    assert len(failed) == 1 and "AMX" in failed[0].detail and failed[0].fix == rebuild_command("0.3.36")
    assert "bootstrap" in failed[0].fix or NO_AMX_FLAGS in failed[0].fix
    assert failed[0].facts["amx_kernels"] == "crash"
    (cpu_finding,) = [f for f in check_build(build, cpu, amx_probe=False) if f.check == "cpu"]
    assert cpu_finding.status == "ok" and "AMX kernels ran a batched decode" in cpu_finding.detail


def test_in_a_checkout_the_rebuild_is_its_bootstrap_script() -> None:
    """Run from a checkout (as the tests are), the fix names the checkout's scripts/bootstrap."""
    checkout = Path(__file__).resolve().parents[2]
    assert checkout / "scripts" / "bootstrap" == app.doctor.checks.BOOTSTRAP
    assert app.doctor.checks.BOOTSTRAP.is_file()


def test_doctor_probes_the_amx_kernels_only_where_they_are_in_use() -> None:
    build, cpu = build_info(), cpu_info()
    assert amx_crashes(build, cpu) is (False if amx_in_use(build, cpu) else None)


def test_threads_report_the_setting_and_a_busy_machine(capsys: pytest.CaptureFixture[str]) -> None:
    cores = available_cores()
    assert main(["config", "set", "ar.n_threads", str(cores + 2)]) == 0
    capsys.readouterr()
    _code, findings = _doctor(capsys)
    assert findings["threads"]["status"] == "warn" and findings["threads"]["fix"] == "sharpen config set ar.n_threads 0"
    assert main(["config", "set", "ar.n_threads", "0"]) == 0
    spinners = [
        subprocess.Popen([sys.executable, "-c", "import time\nt = time.time() + 6\nwhile time.time() < t: pass"])
        for _ in range(cores)
    ]
    try:
        time.sleep(0.5)
        finding = check_threads(Config(), sample_s=1.0)
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()
    assert finding.status == "warn" and "busy" in finding.detail and finding.facts["auto_threads_now"] == 1


def test_a_model_too_big_for_this_machine(
    sharpen_home: Path, embedded_model_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    draft_file = Path(__file__).resolve().parents[2] / "models" / "embedded" / "sharpen-draft-q8_0.gguf"
    config = sharpen_home / "config" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(
        f'[models]\ncomplete = "huge-ar"\ndraft = "huge-draft"\n\n'
        f'[catalogue.huge-ar]\nrole = "complete"\nengine = "llama-ar"\nsource = "path:{embedded_model_path}"\n'
        f"needs_ram_gib = 100000.0\n\n"
        f'[catalogue.huge-draft]\nrole = "draft"\nengine = "llama-diffusion"\nsource = "path:{draft_file}"\n'
        f"needs_ram_gib = 100000.0\n"
    )
    code, findings = _doctor(capsys)
    assert code == 1 and findings["models.complete"]["status"] == "fail"
    assert findings["models.complete"]["fix"] == "sharpen models use smollm2-135m-instruct --for complete"
    assert findings["models.draft"]["status"] == "warn", "drafts fall back to AR"
    assert findings["models.draft"]["fix"] == "sharpen models use sharpen-draft --for draft"
    assert main(["config", "set", "models.check_fit", "false"]) == 0
    capsys.readouterr()
    code, findings = _doctor(capsys)
    assert code == 0 and findings["models.complete"]["status"] == "warn", "the user chose to load it anyway"


def test_a_llama_cpp_without_the_patch_warns_that_drafts_use_the_prefix_cache(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """This build has the patch, so the probe's refusal is stood in for."""
    monkeypatch.setattr(app.doctor.checks, "fills_gaps", lambda _path: False)
    code, findings = _doctor(capsys)
    assert code == 0
    finding = findings["dual cache"]
    detail, fix = str(finding["detail"]), str(finding["fix"])
    assert finding["status"] == "warn" and "prefix cache is used instead" in detail
    assert "scripts/llama-cpp-patches" in fix or "scripts/llama-cpp-wheel" in fix
