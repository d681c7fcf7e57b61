"""The writing model (models.write): AR drafts, rewrites and chat replies on an AR model or an AR LoRA adapter
merged into its base once, in the data dir; ghost text stays on models.complete.

Real parts: llama.cpp on the shipped SmolLM2-135M Q4_1 file (the catalogue knows it by sha256), and a stand-in
writing adapter written here: small random LoRA weights of the right shapes on a few of its matrices.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from app.cli import main
from app.doctor.checks import check_model
from app.domain.draft_request import DraftRequest
from app.service import SharpenService
from app.storage.config import load_config
from app.storage.paths import sharpen_paths
from engines.diffusion.llama_backend import LlamaDiffusionBackend
from engines.llama_ar import LlamaAREngine, LlamaSettings
from models.adapted import AR_MERGED_QUANTIZATION, LoraPair, adapter_info, write_adapter
from models.catalogue import resolve_model
from models.errors import UnsupportedModel
from models.gguf_header import read_gguf_header
from models.gguf_info import inspect_gguf
from models.hub import sha256_of
from router.cost_measurement import QUICK

RANK = 4
# A few of the matrices training/write.py adapts (Sharpen's names; every layer's are adapted there).
ADAPTED = ("blocks.0.attention.q.weight", "blocks.0.attention.v.weight", "blocks.1.down.weight")
PROMPT = "Write a short note to Sam declining Friday's meeting."


def stand_in_lora(base: Path, seed: int) -> dict[str, LoraPair]:
    """Random A (rank, in) and B (out, rank) for ADAPTED, shaped from the base's own matrices."""
    shapes = {t.name: t.shape for t in read_gguf_header(base).tensors}  # innermost first: (in, out)
    names = {"attention.q.weight": "attn_q", "attention.v.weight": "attn_v", "down.weight": "ffn_down"}
    rng = np.random.default_rng(seed)
    lora = {}
    for ours in ADAPTED:
        _, layer, rest = ours.split(".", 2)
        columns, rows = shapes[f"blk.{layer}.{names[rest]}.weight"]
        lora[ours] = (rng.normal(0, 0.2, (RANK, columns)), rng.normal(0, 0.2, (rows, RANK)))
    return lora


def write_stand_in(path: Path, base: Path, seed: int = 0) -> Path:
    return write_adapter(path, base, stand_in_lora(base, seed), alpha=RANK, name="write-stand-in", diffusion=False)


@pytest.fixture(scope="module")
def stand_in(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = resolve_model("smollm2-135m-instruct").path
    return write_stand_in(tmp_path_factory.mktemp("adapters") / "write-lora.gguf", base)


def service_with(**models: str) -> SharpenService:
    paths = sharpen_paths()
    paths.config_file.parent.mkdir(parents=True, exist_ok=True)
    lines = "".join(f'{key} = "{value}"\n' for key, value in models.items())
    # No quick calibration before the first draft: the tests measure what they ask for.
    config = f"[models]\n{lines}\n[ar]\nn_ctx = 1024\n\n[router]\nauto_calibrate = false\n"
    paths.config_file.write_text(config, encoding="utf-8")
    return SharpenService(load_config(paths.config_file), paths)


def next_token_logits(engine: LlamaAREngine, tokens: list[int]) -> np.ndarray:
    llama = engine._llama
    llama.reset()
    llama.eval(tokens)
    return np.ctypeslib.as_array(llama._ctx.get_logits(), shape=(llama.n_vocab(),)).copy()


def test_an_ar_adapter_names_its_base_and_no_mask(stand_in: Path, embedded_model_path: Path) -> None:
    info = adapter_info(stand_in)
    assert not info.makes_diffusion and info.mask_token_id is None and not info.shift_logits
    assert info.base_sha256 == sha256_of(embedded_model_path) and info.rank == RANK


def test_the_merge_is_written_once_reused_and_rebuilt_when_the_adapter_changes(
    tmp_path: Path, embedded_model_path: Path
) -> None:
    adapter = write_stand_in(tmp_path / "write-lora.gguf", embedded_model_path)
    models = service_with(write=str(adapter)).models
    planned = models.served_ar(adapter, write=False)
    assert (planned.path, planned.adapter) == (embedded_model_path, adapter)
    assert "its merged copy is written on first use" in planned.note
    merged = models.served_ar(adapter)
    assert merged.adapter is None and merged.path.parent == models.adapters_dir
    assert "merged in" in merged.note
    # An ordinary AR GGUF, its adapted matrices at the chosen type, the rest as the base has them.
    info = inspect_gguf(merged.path)
    assert not info.is_diffusion and info.architecture == "llama"
    types = {t.name: t.quantization for t in read_gguf_header(merged.path).tensors}
    assert types["blk.0.attn_q.weight"] == AR_MERGED_QUANTIZATION and types["blk.0.attn_k.weight"] == "Q4_1"
    written = merged.path.stat().st_mtime_ns
    assert models.served_ar(adapter).path == merged.path and merged.path.stat().st_mtime_ns == written, "reused"
    before = sha256_of(merged.path)

    write_stand_in(adapter, embedded_model_path, seed=1)
    os.utime(adapter, ns=(written + 10**9, written + 10**9))  # a later version, whatever the clock's grain
    assert "written on first use" in models.served_ar(adapter, write=False).note, "the old merge is not served"
    rebuilt = models.served_ar(adapter)
    assert rebuilt.path == merged.path and sha256_of(rebuilt.path) != before, "rebuilt from the new adapter"


def test_the_merged_writer_computes_what_the_adapter_applied_at_load_does(stand_in: Path) -> None:
    service = service_with(write=str(stand_in))
    base = resolve_model("smollm2-135m-instruct").path
    merged = service.models.served_ar(stand_in).path
    settings = LlamaSettings(n_ctx=256, n_threads=2)
    applied = LlamaAREngine(base, "applied", settings, adapter=stand_in)
    engines = {"base": LlamaAREngine(base, "base", settings), "merged": LlamaAREngine(merged, "merged", settings)}
    tokens = applied.chat_prompt(PROMPT, 16)
    reference = next_token_logits(applied, tokens)
    effect = np.abs(next_token_logits(engines["base"], tokens) - reference).mean()
    error = np.abs(next_token_logits(engines["merged"], tokens) - reference).mean()
    assert effect > 0.05, "the stand-in adapter changes what the model predicts"
    assert error < effect / 5, (error, effect)


def test_drafts_rewrites_and_chat_go_to_the_writing_engine_and_completions_to_the_base(stand_in: Path) -> None:
    service = service_with(write=str(stand_in))
    engines = service.engines
    writer, completer = engines.writer(), engines.ar()
    assert isinstance(writer, LlamaAREngine) and isinstance(completer, LlamaAREngine) and writer is not completer
    assert writer.model_path.parent == service.models.adapters_dir and writer.adapter is None, "merged"
    assert completer.model_path == resolve_model("smollm2-135m-instruct").path
    draft = service.draft(
        DraftRequest("draft", "Say that Friday is fine.", before="Hi Sam,\n\n", tokens=6, engine="ar")
    )
    selection = "The meeting is on Friday."
    rewrite = service.draft(DraftRequest("infill", "shorter", selection=selection, tokens=6, engine="ar"))
    chat = service.chat(PROMPT, max_tokens=6)
    completion = service.complete("The cat sat on the", max_tokens=4)
    for reply in (draft, rewrite, chat, completion):
        reply.text()
    assert [r.model for r in (draft, rewrite, chat)] == [stand_in.name] * 3
    assert completion.model == "smollm2-135m-instruct" and completion.route.model == "smollm2-135m-instruct"
    assert chat.route.model == str(stand_in)
    # The router's AR costs are the writing engine's: it is the one calibration measures and routes estimate.
    size = service.routing.model_size("complete")
    assert size is not None and size.name == stand_in.name
    profile = service.calibrations.calibrate(QUICK, lambda _fraction, _label: None, only=["ar"])
    assert profile.ar.model == stand_in.name and service.routing.cost_profile()[0].ar.measured
    assert service.models.in_use_for("smollm2-135m-instruct") == ("complete",)


def test_naming_the_complete_model_writes_without_the_adapter() -> None:
    service_with(write="sharpen-write")
    assert main(["config", "set", "models.write", "smollm2-135m-instruct"]) == 0
    service = SharpenService.from_environment()
    assert service.engines.writer() is service.engines.ar()
    draft = service.draft(DraftRequest("draft", "Say hello.", tokens=4, engine="ar"))
    assert draft.text() is not None and draft.model == "smollm2-135m-instruct"
    assert service.models.in_use_for("smollm2-135m-instruct") == ("complete", "write")


def test_an_empty_models_write_is_the_complete_models_writing_adapter_where_one_ships(
    tiny_llama_path: Path,
) -> None:
    service = service_with(write="")
    assert service.engines.writing_model == "sharpen-write"
    assert service.models.in_use_for("sharpen-write") == ("write",)
    finding = check_model(service, "write", "")
    assert finding.status == "ok", finding.detail
    # Another complete model has no adapter in the catalogue: it writes too, in one engine.
    other = service_with(complete=str(tiny_llama_path), write="")
    assert other.engines.writing_model == str(tiny_llama_path)
    assert other.models.in_use_for(str(tiny_llama_path)) == ("complete", "write")
    finding = check_model(other, "write", "")
    assert finding.status == "ok" and f"the complete model ({tiny_llama_path}) answers" in finding.detail


def test_a_writing_adapter_the_user_declares_for_the_complete_model_is_the_writer_where_models_write_is_empty(
    stand_in: Path,
) -> None:
    service_with(write="")
    paths = sharpen_paths()
    with paths.config_file.open("a", encoding="utf-8") as config:
        config.write(
            f'\n[catalogue.my-writer]\nrole = "write"\nengine = "llama-ar"\nsource = "path:{stand_in}"\n'
            'writes_for = "smollm2-135m-instruct"\n'
        )
    service = SharpenService(load_config(paths.config_file), paths)
    assert service.engines.writing_model == "my-writer"
    assert service.models.in_use_for("my-writer") == ("write",)
    assert service.models.in_use_for("sharpen-write") == ()


def test_the_diffusion_path_refuses_an_ar_adapter_in_one_line(
    stand_in: Path, embedded_model_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    service = service_with(draft=str(stand_in))
    with pytest.raises(UnsupportedModel, match="keeps its base autoregressive"):
        service.models.check("draft", str(stand_in))
    with pytest.raises(UnsupportedModel, match="keeps its base autoregressive"):
        LlamaDiffusionBackend(embedded_model_path, adapter=stand_in)
    assert main(["draft", "--engine", "diffusion", "--tokens", "8", "Write a note."]) != 0
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("sharpen: error: ")]
    assert len(errors) == 1 and "keeps its base autoregressive" in errors[0] and "Traceback" not in err
    # And the other way: the drafter's adapter is no writing model.
    with pytest.raises(UnsupportedModel, match="diffusion"):
        service.models.check("write", "sharpen-draft")
