"""Whether Sharpen can run a GGUF, as AR, as diffusion or not at all, decided from its header alone.

The order matters: a vision projector or an embedding model may well have an architecture llama.cpp knows
(its table even names "clip", for the quantizer), so what the file is comes before whether llama.cpp builds
its architecture; a diffusion file is one llama.cpp runs as diffusion (llada, dream, ...) or an ordinary
architecture with attention.causal = false and a mask token (Sharpen's exports).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from models.found.architectures import knows_architecture
from models.gguf_info import GGUFInfo

RunsAs = Literal["ar", "diffusion"]
# llama.cpp architectures that only encode text into vectors (their GGUFs often omit pooling_type).
ENCODER_ARCHITECTURES = frozenset(
    {
        "bert",
        "modern-bert",
        "nomic-bert",
        "nomic-bert-moe",
        "neo-bert",
        "jina-bert-v2",
        "jina-bert-v3",
        "eurobert",
        "t5encoder",
        "gemma-embedding",
        "llama-embed",
    }
)
VISION_PROJECTOR = "a vision projector (mmproj) for a multimodal model, not a language model"


@dataclass(frozen=True)
class Verdict:
    runs_as: RunsAs | None
    reason: str = ""

    @property
    def label(self) -> str:
        return {"ar": "AR", "diffusion": "diffusion", None: "no"}[self.runs_as]


def verdict(info: GGUFInfo, metadata: dict[str, Any]) -> Verdict:
    """What Sharpen can do with the file whose header gave `info` and `metadata`."""
    arch = info.architecture
    kind = str(metadata.get("general.type", "model"))
    if kind == "mmproj" or arch == "clip" or any(key.startswith("clip.") for key in metadata):
        return Verdict(None, VISION_PROJECTOR)
    if kind == "adapter":
        return Verdict(None, "a LoRA adapter: it changes a base model and runs only with it")
    if arch in ENCODER_ARCHITECTURES or f"{arch}.pooling_type" in metadata:
        return Verdict(None, f"an embedding model ({arch}): it turns text into vectors and writes none")
    if "tokenizer.ggml.model" not in metadata:
        return Verdict(None, "the file holds no tokenizer")
    known = knows_architecture(arch)
    if known is False:
        return Verdict(None, f"the installed llama.cpp does not know its architecture {arch!r}")
    unchecked = "" if known else "llama.cpp's library could not be read to check its architecture"
    if info.is_diffusion:
        if info.mask_token_id is None:
            return Verdict(None, f"a diffusion model ({arch}) whose file names no mask token")
        return Verdict("diffusion", unchecked)
    return Verdict("ar", unchecked)
