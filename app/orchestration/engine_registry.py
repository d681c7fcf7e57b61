"""The session's engines: loaded from the config's sections on first use, kept, and swapped for another model.

Each engine takes its section as it is: the [ar] section is the AR engine's LlamaSettings, and the
[diffusion] section extends DiffusionLoadSettings, which both diffusion backends take.
"""

from __future__ import annotations

import threading
from dataclasses import replace

from app.orchestration.model_manager import ModelManager
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
from models.remote import RemoteSource, remote_api_key


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
        self._diffusion_lock = threading.Lock()
        # Completions run in the foreground: the draft engines give way to them between passes.
        self.foreground = Foreground()
        self._ar: AREngine | None = None
        self._diffusion: DiffusionEngine | None = None

    def ar(self) -> AREngine:
        """The AR engine for the configured completion model, loaded on first use (a remote model's engine
        only names the server: nothing is sent until a request)."""
        with self._ar_lock:
            if self._ar is None:
                remote = self.models.remote(self.config.models.complete)
                if remote is not None:
                    self._ar = self._remote_engine(remote)
                    return self._ar
                model = self.models.resolve(self.config.models.complete)
                self.models.require_fit_to_load(model)
                self._ar = LlamaAREngine(model.path, model.name, self.config.ar, self.foreground)
            return self._ar

    def _remote_engine(self, remote: RemoteSource) -> AREngine:
        from engines.remote_ar import RemoteAREngine  # the openai client: only for a remote model

        name = self.config.models.complete
        return RemoteAREngine(remote, name, api_key=remote_api_key(), context_length=self.config.ar.n_ctx)

    def diffusion(self) -> DiffusionEngine:
        """The diffusion engine for the configured draft model, loaded on first use."""
        with self._diffusion_lock:
            if self._diffusion is None:
                name = self.config.models.draft.strip()
                if not name:
                    raise NoDraftModel()
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
        if entry is not None and entry.format == "hf-safetensors" and entry.quantization in ("nf4", "int8"):
            return entry.quantization
        return "none"

    def use_model(self, role: str, name: str, *, force: bool = False) -> None:
        """Point a role ("complete" or "draft") at a model, in the config file and in this session: its
        engine loads again on next use."""
        # A missing, corrupt or wrong-kind file fails here, before the config changes.
        self.models.check(role, name, fit=not force)
        set_value(self.paths.config_file, f"models.{role}", name)
        with self._ar_lock, self._diffusion_lock:
            if role == "complete":
                self.config = replace(self.config, models=replace(self.config.models, complete=name))
                self._ar = None
            else:
                self.config = replace(self.config, models=replace(self.config.models, draft=name))
                self._diffusion = None
