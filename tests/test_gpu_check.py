"""bench/gpu_check.sh: the one-command GPU check runs with `--cpu` at tiny shapes, imports nothing but torch and the
torch transformer, prints one table and keeps to its time budget by its own estimate."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import torch

CHECKOUT = Path(__file__).resolve().parents[1]
SCRIPT = CHECKOUT / "bench" / "gpu_check.py"
# What a CUDA torch image lacks, and the rest of Sharpen: importing any of them fails in the subprocess.
NOT_THERE = ("gguf", "llama_cpp", "platformdirs", "tomli_w", "numpy", "app", "engines", "router", "ui", "training")
RUN_WITHOUT = f"""
import runpy, sys
for name in {NOT_THERE!r}:
    sys.modules[name] = None
sys.argv = [{str(SCRIPT)!r}, *sys.argv[1:]]
runpy.run_path({str(SCRIPT)!r}, run_name="__main__")
"""


def _gpu_check() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["gpu_check"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _table(text: str) -> list[list[str]]:
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in text.splitlines() if line.startswith("|")]


def test_the_cpu_run_prints_and_writes_one_table_with_only_torch(tmp_path: Path) -> None:
    env = {**os.environ, "OUT": str(tmp_path)}
    result = subprocess.run(
        [sys.executable, "-I", "-c", RUN_WITHOUT, "--cpu", "--repeats", "1"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    written = (tmp_path / "gpu_check.md").read_text(encoding="utf-8")
    assert "\n".join(line for line in written.splitlines() if line.startswith("|")) in result.stdout
    header, rule, *rows = _table(written)
    assert header == ["shape", "decoding", "block", "N", "passes", "s", "tokens/s", "x AR's speed"]
    assert set("".join(rule)) == {"-"} and len(rule) == len(header)
    # AR and every cache mode that applies: none/prefix/dual for LLaDA, none/block for SDAR and Fast-dLLM v2.
    decodings = [(row[0].removesuffix(" (tiny)"), row[1]) for row in rows]
    assert decodings == [
        ("LLaDA-8B", "AR, KV cache"),
        ("LLaDA-8B", "diffusion, none cache"),
        ("LLaDA-8B", "diffusion, prefix cache"),
        ("LLaDA-8B", "diffusion, dual cache"),
        ("SDAR-8B", "AR, KV cache"),
        ("SDAR-8B", "diffusion, none cache"),
        ("SDAR-8B", "diffusion, block cache"),
        ("Fast-dLLM v2 1.5B", "AR, KV cache"),
        ("Fast-dLLM v2 1.5B", "diffusion, none cache"),
        ("Fast-dLLM v2 1.5B", "diffusion, block cache"),
    ]
    for row in rows:
        assert len(row) == len(header) and row[3] == "32"
        seconds, per_s, speed = float(row[5]), float(row[6]), float(row[7])
        assert seconds > 0 and abs(per_s - 32 / seconds) < 0.1 * per_s + 0.1 and speed > 0
        if row[1].startswith("AR"):
            assert row[4] == "32" and speed == 1.0
        else:  # K = N / 2 passes at 2 tokens a pass
            assert row[4] == "16"
    assert "estimated" in written and "took" in written


def test_the_block_cache_loop_drafts_what_full_re_decoding_drafts() -> None:
    """Block-causal attention makes a settled block's keys and values final: the block cache is exact, so the
    check's own loop must reproduce the none cache's draft token for token."""
    gpu_check = _gpu_check()
    for shape in gpu_check.real_shapes()[1:]:  # SDAR and Fast-dLLM v2
        small = gpu_check.tiny(shape)
        model = gpu_check.make_model(small.spec, torch.device("cpu"), torch.float32, std=0.1)
        prompt = torch.randint(100, 500, (1, 16), generator=torch.Generator().manual_seed(3))
        draft = gpu_check.Draft(16, 32, 2)
        with torch.no_grad():  # scoped: a global switch would leak into every later test that trains
            none = gpu_check.diffusion_decode(model, prompt, draft, small.block, "none")
            block = gpu_check.diffusion_decode(model, prompt, draft, small.block, "block")
        assert (none != small.spec.mask_token_id).all()
        assert torch.equal(block, none)


def test_the_plan_keeps_to_the_budget() -> None:
    gpu_check = _gpu_check()
    draft, bf16 = gpu_check.Draft(192, 256, 2), torch.bfloat16
    h100 = gpu_check.DeviceSpeed(bytes_per_s=2.5e12, flops=6e14, layer_overhead_s=3e-4)
    fast = gpu_check.plan(gpu_check.real_shapes(), draft, h100, bf16, 3, 240.0, 79 * 2**30)
    assert fast.repeats == 3 and fast.estimate_s <= 240 and not fast.notes
    assert [s.spec.layers for s in fast.shapes] == [32, 36, 28]
    slow = gpu_check.DeviceSpeed(bytes_per_s=1e11, flops=2e13, layer_overhead_s=1e-3)
    cut = gpu_check.plan(gpu_check.real_shapes(), draft, slow, bf16, 3, 240.0, 12 * 2**30)
    assert cut.repeats == 1 and cut.estimate_s <= 240
    assert cut.shapes[0].spec.layers < 32 and "of 32 layers" in cut.shapes[0].label
    assert any("memory" in note for note in cut.notes)
