"""Models served by another machine: through an OpenAI-compatible API (`openai:http://host:port/v1#MODEL`, an AR
model or a text-only draft engine), or another Sharpen's pass stream (`sharpen:http://host:port`, drafts)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit

from models.errors import ModelError

OPENAI_PREFIX = "openai:"


class BadRemoteSource(ModelError):
    pass


@dataclass(frozen=True)
class RemoteSource:
    # The API's base URL, ending in /v1 as OpenAI's clients expect.
    base_url: str
    # The model name the server knows (sent as `model` with every request).
    model: str

    @property
    def label(self) -> str:
        return f"{self.model} at {self.base_url}"


def remote_api_key() -> str:
    """The key sent to a remote server: $SHARPEN_REMOTE_API_KEY, else a placeholder (servers on loopback
    usually ask for none). Not $OPENAI_API_KEY: that key is for OpenAI, not for whatever server is named."""
    return os.environ.get("SHARPEN_REMOTE_API_KEY") or "none"


def is_remote(source: str) -> bool:
    return source.startswith(OPENAI_PREFIX)


def parse_remote(source: str) -> RemoteSource:
    """`openai:URL#MODEL` as a RemoteSource; a BadRemoteSource says what is wrong with it."""
    url, _, model = source.removeprefix(OPENAI_PREFIX).partition("#")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise BadRemoteSource(
            f"{source!r} is not a remote model: write openai:http://HOST:PORT/v1#MODEL (an http or https URL)"
        )
    if not model.strip():
        raise BadRemoteSource(f"{source!r} names no model: add #MODEL, the name the server lists at {url}/models")
    return RemoteSource(base_url=url.rstrip("/"), model=model.strip())


# A draft model on another machine: another `sharpen serve` (its pass stream), or an OpenAI-compatible dLLM
# server (text only). models.draft names either; the key is remote_api_key()'s, as for a remote AR model.
SHARPEN_PREFIX = "sharpen:"
RemoteDraftKind = Literal["sharpen", "openai"]


@dataclass(frozen=True)
class RemoteDraftSource:
    kind: RemoteDraftKind
    # sharpen: the server's root (http://host:port); openai: the API's base URL, ending in /v1.
    base_url: str
    # openai: the model name the server knows; sharpen: "" (the remote drafts with its own models.draft).
    model: str = ""

    @property
    def label(self) -> str:
        if self.kind == "sharpen":
            return f"sharpen serve at {self.base_url}"
        return f"{self.model} at {self.base_url}"

    @property
    def animated(self) -> bool:
        """Whether its drafts arrive pass by pass (another Sharpen) or as text only (a plain dLLM server)."""
        return self.kind == "sharpen"


def is_remote_draft(source: str) -> bool:
    return source.startswith((SHARPEN_PREFIX, OPENAI_PREFIX))


def parse_remote_draft(source: str) -> RemoteDraftSource:
    """`sharpen:URL` (another `sharpen serve`) or `openai:URL#MODEL` (an OpenAI-compatible dLLM server) as a
    RemoteDraftSource; a BadRemoteSource says what is wrong with it."""
    if source.startswith(OPENAI_PREFIX):
        remote = parse_remote(source)
        return RemoteDraftSource("openai", remote.base_url, remote.model)
    url = source.removeprefix(SHARPEN_PREFIX).strip()
    parts = urlsplit(url)
    if not source.startswith(SHARPEN_PREFIX) or parts.scheme not in ("http", "https") or not parts.netloc:
        raise BadRemoteSource(
            f"{source!r} is not a remote draft engine: write sharpen:http://HOST:PORT (another `sharpen serve`) "
            "or openai:http://HOST:PORT/v1#MODEL (an OpenAI-compatible server)"
        )
    return RemoteDraftSource("sharpen", url.rstrip("/").removesuffix("/v1"))
