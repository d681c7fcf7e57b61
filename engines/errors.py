"""Typed engine errors. `str(error)` is a complete message for the user."""

from __future__ import annotations


class EngineError(Exception):
    pass


class ModelLoadError(EngineError):
    """llama.cpp (or another backend) refused a model file that looked well-formed."""


class EmptyPromptError(EngineError, ValueError):
    def __init__(self) -> None:
        super().__init__("the prompt is empty: give some text to continue")


class PromptTooLongError(EngineError, ValueError):
    def __init__(self, prompt_tokens: int, max_tokens: int, context_length: int, setting: str = "ar.n_ctx") -> None:
        self.prompt_tokens = prompt_tokens
        self.max_tokens = max_tokens
        self.context_length = context_length
        super().__init__(
            f"the prompt is {prompt_tokens} tokens; with {max_tokens} tokens to generate it needs "
            f"{prompt_tokens + max_tokens}, more than the context of {context_length}. Shorten the prompt, "
            f"ask for fewer tokens, or raise {setting} (`sharpen config set {setting} N`)"
        )


class InvalidRequestError(EngineError, ValueError):
    pass


class EngineBusy(EngineError):
    """The engine cannot take the request now (a remote server's 429 or 503): try again later."""

    def __init__(self, message: str, retry_after_s: int | None = None) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s
