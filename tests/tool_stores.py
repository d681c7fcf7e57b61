"""Other tools' model stores, laid out on disk as those tools lay them out, around real GGUF files: Ollama's
(manifests naming blobs by sha256), LM Studio's (PUBLISHER/REPO/FILE.gguf) and the Hugging Face cache's
(models--OWNER--REPO with snapshots linking into blobs)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import numpy as np
from gguf import GGUFWriter

MODEL_LAYER = "application/vnd.ollama.image.model"


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def add_ollama_model(store: Path, name: str, tag: str, gguf: Path, namespace: str = "library") -> Path:
    """An Ollama model: its blob (a plain file named by its sha256, copied) and a manifest naming it with a
    template layer beside it, as `ollama pull` writes them. Returns the blob."""
    digest = sha256_of(gguf)
    blob = store / "blobs" / f"sha256-{digest}"
    blob.parent.mkdir(parents=True, exist_ok=True)
    if not blob.exists():
        try:
            os.link(gguf, blob)  # the same bytes, without a copy of a 100 MB file per test
        except OSError:
            shutil.copyfile(gguf, blob)
    template = b"{{ .Prompt }}"
    template_digest = hashlib.sha256(template).hexdigest()
    (store / "blobs" / f"sha256-{template_digest}").write_bytes(template)
    manifest = store / "manifests" / "registry.ollama.ai" / namespace / name / tag
    manifest.parent.mkdir(parents=True, exist_ok=True)
    layers = [
        {"mediaType": MODEL_LAYER, "digest": f"sha256:{digest}", "size": gguf.stat().st_size},
        {"mediaType": "application/vnd.ollama.image.template", "digest": f"sha256:{template_digest}", "size": 13},
    ]
    config = {"mediaType": "application/vnd.docker.container.image.v1+json", "digest": "sha256:" + "0" * 64}
    manifest.write_text(
        json.dumps(
            {
                "schemaVersion": 2,
                "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
                "config": config,
                "layers": layers,
            }
        )
    )
    return blob


def add_lmstudio_model(models_folder: Path, publisher: str, repo: str, gguf: Path, filename: str) -> Path:
    """A GGUF in LM Studio's layout, linked to `gguf` (LM Studio reads whatever lies there)."""
    target = models_folder / publisher / repo / filename
    target.parent.mkdir(parents=True, exist_ok=True)
    target.symlink_to(gguf)
    return target


def add_hf_cache_model(cache: Path, repo: str, gguf: Path, filename: str) -> Path:
    """A GGUF in the Hugging Face cache: a blob, a snapshot linking to it, refs/main naming the snapshot."""
    folder = cache / ("models--" + repo.replace("/", "--"))
    commit = "a" * 40
    blob = folder / "blobs" / sha256_of(gguf)
    blob.parent.mkdir(parents=True, exist_ok=True)
    blob.symlink_to(gguf)
    link = folder / "snapshots" / commit / filename
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(Path("..") / ".." / "blobs" / blob.name)
    (folder / "refs").mkdir(exist_ok=True)
    (folder / "refs" / "main").write_text(commit)
    return link


def write_vision_projector(path: Path) -> Path:
    """A vision projector (what LM Studio downloads beside a vision model): architecture "clip", type mmproj."""
    path.parent.mkdir(parents=True, exist_ok=True)
    writer = GGUFWriter(str(path), "clip")
    writer.add_type("mmproj")
    writer.add_bool("clip.has_vision_encoder", True)
    writer.add_tensor("v.patch_embd.weight", np.zeros((8, 8), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def write_embedding_model(path: Path) -> Path:
    """An embedding model's header: a bert with a pooling type and a tokenizer (it writes no text)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    writer = GGUFWriter(str(path), "bert")
    writer.add_uint32("bert.pooling_type", 1)
    writer.add_tokenizer_model("bert")
    writer.add_tensor("token_embd.weight", np.zeros((8, 8), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
