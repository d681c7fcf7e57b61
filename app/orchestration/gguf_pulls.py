"""Block-causal checkpoints (SDAR, Fast-dLLM v2) made ready for llama.cpp: pulled and converted on one bar
(`sharpen models pull NAME --gguf`), or converted from a folder or a catalogue name (`sharpen models convert`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from app.orchestration.model_records import GGUFPull
from models.catalogue import CatalogueEntry, resolve_model
from models.checkpoint_gguf import Quantization, write_checkpoint_gguf
from models.errors import ModelError
from models.file_lock import locked
from models.gguf_pull import OneBar, StageCallback, convert_once, converted_gguf, converts_to_gguf, remove_ggufs
from models.hub import HubSettings, PullError, remove

if TYPE_CHECKING:
    from app.orchestration.model_manager import ModelManager


def pull_gguf(
    models: ModelManager,
    name: str,
    *,
    quantization: Quantization = "Q8_0",
    drop_safetensors: bool = False,
    offline: bool = False,
    force: bool = False,
    progress: StageCallback | None = None,
) -> GGUFPull:
    """Pull a block-causal checkpoint (SDAR, Fast-dLLM v2) ready for llama.cpp: download it into the Hugging
    Face cache, convert it into the data dir and check the GGUF, as stages of one progress bar. Each stage
    resumes: huggingface_hub resumes the download, a conversion stopped midway starts over, and a GGUF
    already written is kept (nothing is downloaded then). The safetensors stay in the cache for the torch
    backend unless `drop_safetensors`."""
    entry = models.entry(name)
    if not converts_to_gguf(entry):
        raise PullError(_why_no_gguf(entry))
    bar = OneBar(name, progress)
    target = converted_gguf(models.converted_dir, name, quantization)
    download, converted = None, False
    if not target.is_file():
        download = models.pull(name, offline=offline, force=force, progress=bar.download)
        bar.stage("download", 1.0, f"downloaded {download.verified_files} file(s), verified")
        converted = convert_once(download.path, target, quantization, bar.convert)
        remove_ggufs(models.converted_dir, name, keep=target)
    bar.stage("check", 0.0, "checking the GGUF")
    try:
        models.check("draft", name, fit=False)
    except ModelError:
        target.unlink(missing_ok=True)  # the next pull writes it again
        raise
    bar.stage("check", 1.0, "checked")
    dropped = remove(entry.hub_model, HubSettings.from_environment(offline=offline)) if drop_safetensors else 0
    return GGUFPull(target, download, converted, dropped)


def convert(
    models: ModelManager,
    source: str,
    quantization: Quantization,
    out: Path | None,
    progress: Callable[[int, int], None],
) -> Path:
    """Write a block-causal checkpoint (a folder, or a catalogue name's) as a GGUF: into `out`, or the data
    dir. A catalogue name's goes where its name then resolves to (replacing its other quantizations)."""
    folder = Path(source).expanduser()
    if folder.is_dir():
        target = out or models.converted_dir / f"{folder.name}.{quantization}.gguf"
        target.parent.mkdir(parents=True, exist_ok=True)
        return write_checkpoint_gguf(folder, target, quantization, progress)
    entry = models.entry(source)
    checkpoint = resolve_model(source, {source: entry}).path
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        return write_checkpoint_gguf(checkpoint, out, quantization, progress)
    target = converted_gguf(models.converted_dir, source, quantization)
    target.parent.mkdir(parents=True, exist_ok=True)
    with locked(target.with_suffix(".lock")):
        write_checkpoint_gguf(checkpoint, target, quantization, progress)
    remove_ggufs(models.converted_dir, source, keep=target)
    return target


def _why_no_gguf(entry: CatalogueEntry) -> str:
    if entry.format == "gguf":
        return f"{entry.name} is a GGUF already: `sharpen models pull {entry.name}` downloads it, without --gguf"
    return (
        f"{entry.name} cannot be converted to a GGUF: Sharpen converts block-causal checkpoints (SDAR, Fast-dLLM v2, "
        "whose catalogue entries name decoding_sampler sdar or fast_dllm_v2); LLaDA and Dream have GGUFs of their "
        "own (`sharpen models list`)"
    )
