"""A block-causal checkpoint (SDAR, Fast-dLLM v2) made ready for llama.cpp: where its GGUF lives, writing it
once, and the pull's stages (download, conversion, check) as one progress bar.

The GGUF is written through a temporary file renamed when whole (models/checkpoint_gguf.py), one writer at a
time (a lock file), so a conversion stopped midway leaves no GGUF and the next one starts over from the
checkpoint; a GGUF that is there is whole and is not written again.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from models.catalogue import CatalogueEntry
from models.checkpoint_gguf import GGUF_ARCHITECTURES, QUANTIZATIONS, Quantization, write_checkpoint_gguf
from models.file_lock import locked
from models.fit import DISK_MARGIN_BYTES, DoesNotFit
from models.hf_checkpoint import inspect_checkpoint
from models.hub import PullProgress

# What one parameter takes in the GGUF (Q8_0: 32 weights in 34 bytes; norms and biases stay F32, a rounding).
GGUF_BYTES_PER_PARAMETER: dict[Quantization, float] = {"F32": 4.0, "F16": 2.0, "Q8_0": 34 / 32}
Stage = Literal["download", "convert", "check"]
# Each stage's part of the one bar. The download's part passes at once when the checkpoint is in the cache.
STAGE_SPANS: dict[Stage, tuple[float, float]] = {"download": (0.0, 0.5), "convert": (0.5, 0.98), "check": (0.98, 1.0)}


def converts_to_gguf(entry: CatalogueEntry) -> bool:
    """A catalogue checkpoint Sharpen writes as a GGUF: a block-causal model, which its authors' sampler marks."""
    return entry.format == "hf-safetensors" and entry.decoding_sampler in GGUF_ARCHITECTURES


def converted_gguf(folder: Path, name: str, quantization: Quantization) -> Path:
    return folder / f"{name}.{quantization}.gguf"


def current_gguf(folder: Path, name: str) -> Path | None:
    """The catalogue model `name`'s GGUF in `folder`, if one was written (the newest, if several were)."""
    found = [path for q in QUANTIZATIONS if (path := converted_gguf(folder, name, q)).is_file()]
    return max(found, key=lambda path: path.stat().st_mtime_ns, default=None)


def remove_ggufs(folder: Path, name: str, *, keep: Path | None = None) -> int:
    """Delete the catalogue model `name`'s GGUFs (all but `keep`); the bytes freed."""
    freed = 0
    for quantization in QUANTIZATIONS:
        path = converted_gguf(folder, name, quantization)
        if path != keep and path.is_file():
            freed += path.stat().st_size
            path.unlink()
    return freed


def convert_once(
    checkpoint: Path, target: Path, quantization: Quantization, progress: Callable[[int, int], None] | None = None
) -> bool:
    """Write `target` from `checkpoint` unless it is there already; True if it was written now."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with locked(target.with_suffix(".lock")):
        if target.is_file():
            return False
        require_room(checkpoint, target, quantization)
        write_checkpoint_gguf(checkpoint, target, quantization, progress)
        return True


def require_room(checkpoint: Path, target: Path, quantization: Quantization) -> None:
    needed = int(inspect_checkpoint(checkpoint).parameter_count * GGUF_BYTES_PER_PARAMETER[quantization])
    free = shutil.disk_usage(target.parent).free
    if free < needed + DISK_MARGIN_BYTES:
        raise DoesNotFit(
            f"refusing to convert {checkpoint}: its {quantization} GGUF needs about {needed / 1e9:.1f} GB and "
            f"{target.parent} has {free / 1e9:.1f} GB free. Free some space (or set SHARPEN_HOME elsewhere)"
        )


def _size(n: int) -> str:
    return f"{n / 1e9:.2f} GB" if n >= 1e9 else f"{n / 1e6:.1f} MB"


@dataclass(frozen=True)
class StageProgress:
    """Where a pull ready for llama.cpp stands: its share of the whole (0 to 1) and what it is doing."""

    model: str
    stage: Stage
    share: float
    detail: str


StageCallback = Callable[[StageProgress], None]


class OneBar:
    """The stages of a pull turned into one rising share: the download's bytes over all its files, then the
    conversion's tensors, then the check, each within its part of the bar (STAGE_SPANS)."""

    def __init__(self, model: str, callback: StageCallback | None) -> None:
        self.model = model
        self.callback = callback or (lambda _event: None)
        self.share = 0.0

    def download(self, event: PullProgress) -> None:
        whole = event.pull_total_bytes is not None
        done, total = (
            (event.pull_done_bytes, event.pull_total_bytes) if whole else (event.done_bytes, event.total_bytes)
        )
        of = f" of {_size(total)}" if total else ""
        detail = f"downloading {event.file} (file {event.file_index} of {event.file_count}), {_size(done)}{of}"
        self.stage("download", done / total if total else 0.0, detail)

    def convert(self, done: int, total: int) -> None:
        self.stage("convert", done / total if total else 1.0, f"converting to GGUF, tensor {done} of {total}")

    def stage(self, stage: Stage, within: float, detail: str) -> None:
        start, end = STAGE_SPANS[stage]
        self.share = max(self.share, start + (end - start) * min(1.0, max(0.0, within)))
        self.callback(StageProgress(self.model, stage, self.share, detail))
