"""Ollama's store: manifests/<registry host>/<namespace>/<name>/<tag> (JSON) name their layers by digest, and
the layer of media type application/vnd.ollama.image.model is the GGUF, kept as blobs/sha256-<hex>.

Names are shown as Ollama shows them: name:tag for the default registry's library/ namespace,
namespace/name:tag for another namespace, host/namespace/name:tag for another registry.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

from models.found.files import FoundFile, Skipped, StoreScan, readable_json

STORE = "ollama"
MODELS_ENV = "OLLAMA_MODELS"
DEFAULT_REGISTRY = "registry.ollama.ai"
DEFAULT_NAMESPACE = "library"
MODEL_LAYER = "application/vnd.ollama.image.model"
# The Linux installer's service keeps its store in the ollama user's home.
LINUX_SERVICE_STORE = Path("/usr/share/ollama/.ollama/models")


def ollama_roots(home: Path, env: Mapping[str, str] = os.environ) -> list[Path]:
    """Where Ollama keeps models: $OLLAMA_MODELS, else ~/.ollama/models (and the Linux service's store)."""
    configured = env.get(MODELS_ENV, "").strip()
    if configured:
        return [Path(configured).expanduser()]
    roots = [home / ".ollama" / "models"]
    if sys.platform.startswith("linux"):
        roots.append(LINUX_SERVICE_STORE)
    return roots


def display_name(host: str, namespace: str, model: str, tag: str) -> str:
    if host != DEFAULT_REGISTRY:
        return f"{host}/{namespace}/{model}:{tag}"
    if namespace != DEFAULT_NAMESPACE:
        return f"{namespace}/{model}:{tag}"
    return f"{model}:{tag}"


def blob_path(root: Path, digest: str) -> Path:
    return root / "blobs" / digest.replace(":", "-")


def scan_ollama(root: Path) -> StoreScan:
    manifests = root / "manifests"
    scan = StoreScan(STORE, root, manifests.is_dir())
    if not scan.exists:
        return scan
    for manifest in sorted(manifests.glob("*/*/*/*")):
        if not manifest.is_file():
            continue
        host, namespace, model, tag = manifest.relative_to(manifests).parts
        name = display_name(host, namespace, model, tag)
        found = _model_layer(manifest, name)
        if isinstance(found, Skipped):
            scan.skipped.append(found)
            continue
        path = blob_path(root, found)
        if not path.is_file():
            scan.skipped.append(Skipped(STORE, name, f"its model layer {path.name} is missing from blobs/"))
            continue
        short = name.removesuffix(":latest") if tag == "latest" else ""
        scan.files.append(FoundFile(STORE, name, path, short))
    return scan


def _model_layer(manifest: Path, name: str) -> str | Skipped:
    """The digest of a manifest's model layer, or why there is none."""
    data = readable_json(manifest)
    if not isinstance(data, dict):
        return Skipped(STORE, name, "its manifest is not readable JSON")
    layers = data.get("layers")
    digests = [
        layer.get("digest")
        for layer in (layers if isinstance(layers, list) else [])
        if isinstance(layer, dict) and layer.get("mediaType") == MODEL_LAYER
    ]
    if not digests or not isinstance(digests[0], str):
        return Skipped(STORE, name, f"its manifest has no {MODEL_LAYER} layer")
    return digests[0]
