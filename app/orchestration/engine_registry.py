"""The session's engines: loaded from the config's sections on first use, kept, and swapped for another model.

Each engine takes its section as it is: the [ar] section is the AR engines' LlamaSettings, and the
[diffusion] section extends DiffusionLoadSettings, which both diffusion backends take. Two AR engines are
kept where models.write names another model than models.complete (ghost text on one, drafts, rewrites and
chat on the other); one serves both where it is empty or the same.
"""

from __future__ import annotations

import threading
from dataclasses import replace
from pathlib import Path

from app.orchestration.model_manager import ModelManager
from app.orchestration.remote_drafts import RemoteDrafts
from app.storage.config import Config, set_value
from app.storage.paths import SharpenPaths
from engines.ar_engine import AREngine
from engines.diffusion.backend import TextDiffusionBackend
from engines.diffusion.engine import DiffusionEngine
from engines.diffusion.llama_backend import LlamaDiffusionBackend
from engines.diffusion.load_settings import DiffusionLoadSettings
from engines.llama_ar import LlamaAREngine
from engines.threads import Foreground
from models.catalogue import ResolvedModel
from models.errors import ModelError, UnsupportedModel
from models.hf_checkpoint import is_checkpoint_folder
from models.remote import is_remote_draft, parse_remote_draft, remote_api_key


class NoDraftModel(ModelError):
    def __init__(self) -> None:
        super().__init__(
            "no diffusion model is configured for drafts: set one with `sharpen config set models.draft PATH` "
            "(a Dream, LLaDA, LLaDA-MoE or RND1 GGUF, or a Sharpen export)"
        )


class EngineRegistry:
    """The AR and diffusion engines of one session, for the models `config` names.

    `config` is the session's configuration: use_model() replaces it. `models` reads it (the default one
    is built reading this registry's config)."""

    def __init__(self, paths: SharpenPaths, config: Config, models: ModelManager | None = None) -> None:
        self.paths = paths
        self.config = config
        self.models = models if models is not None else ModelManager(paths, lambda: self.config)
        # One lock per engine: loading the draft model (and writing its cacheable copy, minutes for a
        # multi-GB file) never holds up a completion. Swapping a model takes both.
        self._ar_lock = threading.Lock()
        self._writer_lock = threading.Lock()
        self._diffusion_lock = threading.Lock()
        # Completions run in the foreground: the draft engines give way to them between passes.
        self.foreground = Foreground()
        self._ar: AREngine | None = None
        self._writer: AREngine | None = None
        self._diffusion: DiffusionEngine | None = None
        self._remote_drafts: RemoteDrafts | None = None

    @property
    def writing_model(self) -> str:
        """The model AR drafts, rewrites and chat replies run on (models.write, or the complete model; the
        embedded one where the configured model's file is gone)."""
        return self.models.serving("write").name

    @property
    def complete_model(self) -> str:
        """The model ghost text runs on: models.complete, or the embedded one where its file is gone."""
        return self.models.serving("complete").name

    def ar(self) -> AREngine:
        """The AR engine for the configured completion model (ghost text), loaded on first use (a remote
        model's engine only names the server: nothing is sent until a request)."""
        with self._ar_lock:
            if self._ar is None:
                self._ar = self._ar_engine(self.complete_model)
            return self._ar

    def writer(self) -> AREngine:
        """The AR engine drafts, rewrites and chat replies run on: the completion engine itself where
        the writing model is the completion model, else its own engine, loaded on first use (for an
        adapter, merged into its base once, which completions do not wait for)."""
        name = self.writing_model
        if name == self.complete_model:
            return self.ar()
        with self._writer_lock:
            if self._writer is None:
                self._writer = self._ar_engine(name)
            return self._writer

    def _ar_engine(self, name: str) -> AREngine:
        remote = self.models.remote(name)
        if remote is not None:
            from engines.remote_ar import RemoteAREngine  # the openai client: only for a remote model

            return RemoteAREngine(remote, name, api_key=remote_api_key(), context_length=self.config.ar.n_ctx)
        model = self.models.resolve(name)
        self.models.require_fit_to_load(model)
        served = self.models.served_ar(model.path)
        return LlamaAREngine(served.path, model.name, self.config.ar, self.foreground, adapter=served.adapter)

    def remote_drafts(self) -> RemoteDrafts | None:
        """The remote draft engine models.draft names (sharpen:URL, openai:URL#MODEL); None for a local model.
        Its key is the remote AR engine's ($SHARPEN_REMOTE_API_KEY)."""
        name = self.config.models.draft.strip()
        if not is_remote_draft(name):
            return None
        with self._diffusion_lock:
            if self._remote_drafts is None:
                self._remote_drafts = RemoteDrafts(parse_remote_draft(name), api_key=remote_api_key())
            return self._remote_drafts

    def diffusion(self) -> DiffusionEngine:
        """The diffusion engine for the configured draft model, loaded on first use."""
        with self._diffusion_lock:
            if self._diffusion is None:
                name = self.models.serving("draft").name.strip()
                if not name:
                    raise NoDraftModel()
                if is_remote_draft(name):
                    raise UnsupportedModel(
                        Path(name), "is a draft engine on another machine", "It drafts and is calibrated there."
                    )
                model = self.models.resolve(name)
                self.models.require_fit_to_load(model)
                if is_checkpoint_folder(model.path):
                    self._diffusion = DiffusionEngine(self._torch_backend(model), model.name)
                    return self._diffusion
                served = self.models.served_file(model.path)
                backend = LlamaDiffusionBackend(
                    served.path, self.load_settings(model), adapter=served.adapter, foreground=self.foreground
                )
                self._diffusion = DiffusionEngine(backend, model.name)
            return self._diffusion

    def load_settings(self, model: ResolvedModel) -> DiffusionLoadSettings:
        """What the draft model is loaded with: the [diffusion] section's load options, ar.n_gpu_layers (one
        setting for both engines) and the quantization chosen for this model."""
        return DiffusionLoadSettings.copied_from(
            self.config.diffusion,
            n_gpu_layers=self.config.ar.n_gpu_layers,
            quantization=self.quantization_for(model),
        )

    def _torch_backend(self, model: ResolvedModel) -> TextDiffusionBackend:
        folder = model.path
        # Imported here: torch is an optional extra, and everything else in Sharpen runs without it.
        try:
            from engines.diffusion.hf.backend import TorchDiffusionBackend
        except ImportError as error:
            raise UnsupportedModel(
                folder,
                f"is a Hugging Face checkpoint, which needs torch ({error})",
                "Install the torch extra (pip install -e '.[torch]'), or use a GGUF of the model.",
            ) from error
        return TorchDiffusionBackend(folder, self.load_settings(model), self.foreground)

    def quantization_for(self, model: ResolvedModel) -> str:
        """diffusion.quantization, with "auto" settled: the catalogue entry's bitsandbytes quantization for
        a checkpoint, else none."""
        chosen = self.config.diffusion.quantization
        if chosen != "auto":
            return chosen
        entry = model.entry
        # A checkpoint entry's GGUF (`models pull NAME --gguf`) is a file, which llama.cpp loads as it is.
        checkpoint = entry is not None and entry.format == "hf-safetensors" and not model.path.is_file()
        if checkpoint and entry is not None and entry.quantization in ("nf4", "int8"):
            return entry.quantization
        return "none"

    def use_model(self, role: str, name: str, *, force: bool = False) -> str:
        """Point a role ("complete", "write" or "draft") at a model, in the config file and in this session:
        its engine loads again on next use. An empty name for "write" puts writing back on the complete model.
        A found model asked for by its short name (publisher/repo) is stored under its full name, which stays
        unambiguous when another file lands beside it. Returns the name stored."""
        # A missing, corrupt or wrong-kind file fails here, before the config changes.
        if role != "write" or name.strip():
            model = self.models.check(role, name, fit=not force)
            name = model.name if model.found is not None else name
        set_value(self.paths.config_file, f"models.{role}", name)
        with self._ar_lock, self._writer_lock, self._diffusion_lock:
            models = self.config.models
            if role == "complete":
                models = replace(models, complete=name)
                self._ar = None
            elif role == "write":
                models = replace(models, write=name)
            else:
                models = replace(models, draft=name)
                self._diffusion = self._remote_drafts = None
            self.config = replace(self.config, models=models)
            if role == "write" or self.writing_model == self.complete_model:
                self._writer = None  # loads again, or is no longer needed: the completion engine writes
        return name
