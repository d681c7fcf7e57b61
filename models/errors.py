"""Typed errors about model files. Each message names the file and says what to do about it."""

from __future__ import annotations

from pathlib import Path


class ModelError(Exception):
    """A model cannot be used. `str(error)` is a complete message for the user."""


class ModelFileError(ModelError):
    def __init__(self, path: Path | str, problem: str, hint: str = "") -> None:
        self.path = Path(path)
        self.problem = problem
        self.hint = hint
        message = f"{self.path}: {problem}"
        super().__init__(f"{message}. {hint}" if hint else message)


class MissingModelFile(ModelFileError):
    pass


class NotGGUFFile(ModelFileError):
    pass


class TruncatedGGUFFile(ModelFileError):
    pass


class UnsupportedModel(ModelFileError):
    """A well-formed GGUF that the engine asked for cannot serve (wrong architecture or kind)."""


class UnknownModel(ModelError):
    def __init__(self, name: str, known: list[str]) -> None:
        self.name = name
        super().__init__(
            f"unknown model {name!r}: not in the catalogue ({', '.join(known)}), not a path to a .gguf file and "
            "not a model found in Ollama's store, LM Studio's folders, models.folders or the HF cache "
            "(`sharpen models list` shows them)"
        )
