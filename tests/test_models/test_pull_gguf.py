"""`sharpen models pull NAME --gguf`: a block-causal checkpoint downloaded, converted and checked for llama.cpp.

The catalogue's own SDAR and Fast-dLLM v2 entries are pulled from the loopback Hub (tests/hub_server.py),
which serves tiny random checkpoints in their real layouts (tests/fixture_checkpoints.py) under the real
repositories' names; the real huggingface_hub client downloads them, the real converter writes the GGUF and
llama.cpp drafts with it. Interruptions are real too: the server goes away mid-file, Ctrl-C mid-conversion.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from fixture_checkpoints import random_weights, write_checkpoint
from hub_server import FakeHub, HubFile

from app.cli import main
from app.orchestration.gguf_pulls import pull_gguf
from app.service import SharpenService
from app.storage.config import load_config
from app.storage.paths import sharpen_paths
from engines.diffusion.llama_backend import LlamaDiffusionBackend
from models.gguf_info import inspect_gguf
from models.gguf_pull import StageProgress
from models.hub import PullError

SDAR_REPO = "JetLM/SDAR-1.7B-Chat"  # the catalogue's sdar-1.7b-chat
FAST_REPO = "Efficient-Large-Model/Fast_dLLM_v2_1.5B"  # its fast-dllm-v2-1.5b
CHUNK = 10 * 1024 * 1024  # huggingface_hub writes downloads in chunks of this size


def service() -> SharpenService:
    paths = sharpen_paths()
    return SharpenService(load_config(paths.config_file), paths)


def serve_checkpoint(hub: FakeHub, tmp_path: Path, repo: str, architecture: str) -> dict[str, HubFile]:
    folder = write_checkpoint(tmp_path / architecture, architecture, weights=random_weights(architecture, seed=11))
    files = {p.name: HubFile(p.read_bytes(), lfs=p.suffix == ".safetensors") for p in folder.iterdir()}
    files["modeling_sdar.py"] = HubFile(b"raise SystemExit('remote code must never run')", lfs=False)
    hub.add(repo, files)
    return files


def converted_dir() -> Path:
    return sharpen_paths().data_dir / "converted"


def partial_bytes(repo: str) -> int:
    """What an interrupted download left in the cache for the next pull to resume."""
    blobs = Path(os.environ["HF_HOME"]) / "hub" / ("models--" + repo.replace("/", "--")) / "blobs"
    return sum(p.stat().st_size for p in blobs.glob("*.sharpen-partial"))


def test_sdar_pulled_ready_for_llama_cpp_resumes_each_stage_and_drafts_with_the_entrys_settings(
    hub: FakeHub, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = serve_checkpoint(hub, tmp_path, SDAR_REPO, "sdar")
    weights = files["model.safetensors"]
    assert len(weights.content) > 2 * CHUNK  # so a part of it is on disk when the server goes away
    weights.drop_after, weights.drops, weights.gone_after_drops = CHUNK + 100_000, 1, True

    # 1. The server goes away in the middle of the weights: one error line, what came is kept.
    assert main(["models", "pull", "sdar-1.7b-chat", "--gguf"]) != 0
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines[-1].startswith("sharpen: error:") and "model.safetensors" in lines[-1]
    assert not any(line.startswith("sharpen: error:") for line in lines[:-1])
    assert partial_bytes(SDAR_REPO) == CHUNK
    assert [r.range for r in hub.downloads("model.safetensors")] == [None, f"bytes={CHUNK}-"]

    # 2. Back again: the download resumes where it stopped; Ctrl-C in the middle of the conversion leaves no GGUF.
    weights.gone_after_drops = False
    stages: list[StageProgress] = []

    def interrupt_midway(event: StageProgress) -> None:
        stages.append(event)
        if event.stage == "convert" and event.share > 0.7:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        pull_gguf(service().models, "sdar-1.7b-chat", progress=interrupt_midway)
    assert [r.range for r in hub.downloads("model.safetensors")] == [None, f"bytes={CHUNK}-", f"bytes={CHUNK}-"]
    assert len(hub.downloads("config.json")) == 1  # fetched once, by the first pull
    assert [e.share for e in stages] == sorted(e.share for e in stages)  # one bar, rising through the stages
    # The download's part of the bar starts where the resumed file stands among all the files' bytes.
    wanted = {name: len(f.content) for name, f in files.items() if not name.endswith(".py")}
    before = sum(size for name, size in wanted.items() if name < "model.safetensors")
    first = next(e for e in stages if e.stage == "download")
    assert first.share == pytest.approx(0.5 * (before + CHUNK) / sum(wanted.values()))
    assert {e.stage for e in stages} == {"download", "convert"} and stages[-1].share < 0.98
    assert not list(converted_dir().glob("*.gguf")) and not list(converted_dir().glob("*.partial"))

    # 3. Again: nothing is downloaded, the conversion starts over (past a partial file a killed run left).
    (converted_dir() / "sdar-1.7b-chat.Q8_0.partial").write_bytes(b"a killed conversion's leftovers")
    requests = len(hub.downloads("model.safetensors"))
    assert main(["models", "pull", "sdar-1.7b-chat", "--gguf"]) == 0
    out, err = capsys.readouterr()
    assert len(hub.downloads("model.safetensors")) == requests
    bar = err.strip().splitlines()
    assert all(line.startswith("sdar-1.7b-chat: [") for line in bar) and "converting to GGUF" in err
    assert bar[-1].startswith("sdar-1.7b-chat: [" + "#" * 24 + "] 100.0% checked")
    assert "in the cache" in out and "converted" in out and "checked" in out
    assert "drafts on llama.cpp with blocks of 4, the sdar sampler, threshold 0.85" in out
    assert "safetensors stay in the Hugging Face cache" in out
    gguf = converted_dir() / "sdar-1.7b-chat.Q8_0.gguf"
    assert str(gguf) in out and not (converted_dir() / "sdar-1.7b-chat.Q8_0.partial").exists()
    info = inspect_gguf(gguf)
    assert (info.architecture, info.block_causal_length, info.file_type) == ("qwen3", 4, "Q8_0")

    # 4. A GGUF that is there is not written again, and nothing is asked of the Hub.
    written, asked = gguf.stat().st_mtime_ns, len(hub.requests)
    assert main(["models", "pull", "sdar-1.7b-chat", "--gguf"]) == 0
    assert "its GGUF was already written" in capsys.readouterr().out
    assert gguf.stat().st_mtime_ns == written and len(hub.requests) == asked

    # 5. Its catalogue name runs the GGUF on llama.cpp, with the entry's block length, sampler and threshold.
    assert main(["models", "list", "--json"]) == 0
    listed = {m["name"]: m for m in json.loads(capsys.readouterr().out)}["sdar-1.7b-chat"]
    assert (listed["runs_on"], listed["engine"], listed["path"]) == ("llama.cpp", "llama-diffusion", str(gguf))
    assert main(["models", "info", "sdar-1.7b-chat", "--json"]) == 0
    assert "torch backend runs it by this path" in json.loads(capsys.readouterr().out)["checkpoint"]
    assert main(["models", "use", "sdar-1.7b-chat", "--for", "draft"]) == 0
    capsys.readouterr()
    assert main(["draft", "Write a note to Sam.", "--tokens", "16", "--engine", "diffusion", "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["model"] == "sdar-1.7b-chat" and payload["cache"] == "block"
    settings = payload["settings"]
    assert (settings["block_length"], settings["sampler"], settings["threshold"]) == (4, "sdar", 0.85)
    engine = service().engines.diffusion()
    assert isinstance(engine.backend, LlamaDiffusionBackend) and engine.backend.model_path == gguf

    # 6. `models rm` takes the GGUF with the safetensors.
    assert main(["models", "use", "sharpen-draft", "--for", "draft"]) == 0
    assert main(["models", "rm", "sdar-1.7b-chat"]) == 0
    assert not gguf.exists()


def test_dropping_the_safetensors_keeps_the_gguf_usable_by_name(
    hub: FakeHub, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    serve_checkpoint(hub, tmp_path, FAST_REPO, "fast_dllm_v2")
    args = ["models", "pull", "fast-dllm-v2-1.5b", "--gguf", "--quantization", "F16", "--drop-safetensors"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "its safetensors were removed from the Hugging Face cache" in out
    assert "blocks of 32, the fast_dllm_v2 sampler, threshold 0.9" in out
    snapshot = Path(os.environ["HF_HOME"]) / "hub" / ("models--" + FAST_REPO.replace("/", "--"))
    assert not list(snapshot.rglob("*.safetensors"))
    gguf = converted_dir() / "fast-dllm-v2-1.5b.F16.gguf"
    assert service().models.resolve("fast-dllm-v2-1.5b").path == gguf
    assert main(["models", "use", "fast-dllm-v2-1.5b", "--for", "draft"]) == 0
    asked = len(hub.requests)
    assert main(["models", "pull", "fast-dllm-v2-1.5b", "--gguf", "--quantization", "F16"]) == 0
    assert len(hub.requests) == asked


def test_models_that_cannot_be_converted_are_one_error_line(
    hub: FakeHub, llada_checkpoint: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for name, reason in (
        ("llada-8b-instruct", "cannot be converted to a GGUF"),
        ("dream-7b-instruct-q4km", "is a GGUF already"),
    ):
        assert main(["models", "pull", name, "--gguf"]) != 0
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("sharpen: error:") and reason in err[0]
    assert hub.requests == []
    assert main(["models", "pull", "sdar-1.7b-chat", "--drop-safetensors"]) != 0
    assert "--drop-safetensors goes with --gguf" in capsys.readouterr().err
    # An entry that says it is SDAR over a checkpoint that is not: refused by the converter, nothing left behind.
    hub.add("acme/not-sdar", {p.name: HubFile(p.read_bytes()) for p in llada_checkpoint.iterdir()})
    sharpen_paths().config_file.parent.mkdir(parents=True, exist_ok=True)
    sharpen_paths().config_file.write_text(
        '[catalogue.not-sdar]\nrole = "draft"\nengine = "torch-diffusion"\nsource = "hf:acme/not-sdar"\n'
        'format = "hf-safetensors"\ndecoding_sampler = "sdar"\n',
        encoding="utf-8",
    )
    assert main(["models", "pull", "not-sdar", "--gguf"]) != 0
    err = capsys.readouterr().err.strip().splitlines()  # the bar's lines, then the error
    assert [line for line in err if line.startswith("sharpen: error:")] == err[-1:] and "block-causal" in err[-1]
    assert not list(converted_dir().glob("not-sdar*.gguf")) and not list(converted_dir().glob("*.partial"))
    with pytest.raises(PullError, match="cannot be converted"):
        pull_gguf(service().models, "dream-7b-instruct")


def test_convert_by_name_writes_where_the_name_resolves(
    hub: FakeHub, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    serve_checkpoint(hub, tmp_path, SDAR_REPO, "sdar")
    assert main(["models", "pull", "sdar-1.7b-chat"]) == 0
    assert service().models.resolve("sdar-1.7b-chat").path.is_dir()  # the checkpoint: torch
    for quantization in ("F16", "Q8_0"):
        capsys.readouterr()
        assert main(["models", "convert", "sdar-1.7b-chat", "--quantization", quantization]) == 0
        assert "sharpen models use sdar-1.7b-chat --for draft" in capsys.readouterr().out
    assert sorted(p.name for p in converted_dir().glob("*.gguf")) == ["sdar-1.7b-chat.Q8_0.gguf"]
    assert service().models.resolve("sdar-1.7b-chat").path == converted_dir() / "sdar-1.7b-chat.Q8_0.gguf"
