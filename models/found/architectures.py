"""The model architectures the installed llama.cpp knows, read without loading a model or the library.

llama.cpp names each architecture it builds in one table of C strings (llama-arch.cpp's LLM_ARCH_NAMES),
which the linker stores in the shared library's read-only data, NUL-terminated. An architecture is known when
its name is one of the library's strings; the linker may also keep a name as the tail of a longer string
("qwen2" inside "rwkv6qwen2"), which counts for the names the gguf package knows as architectures (any other
word could be the tail of an unrelated string). The library is found as llama-cpp-python finds it
($LLAMA_CPP_LIB_PATH, else the package's lib/ folder) without importing llama_cpp, and read once per version.
"""

from __future__ import annotations

import functools
import importlib.util
import os
from pathlib import Path

from gguf import MODEL_ARCH_NAMES

LIB_PATH_ENV = "LLAMA_CPP_LIB_PATH"
LIBRARY_NAMES = ("libllama.so", "libllama.dylib", "llama.dll", "libllama.dll")
# Names the gguf package's converters write: the candidates a tail match may confirm.
GGUF_ARCHITECTURES = frozenset(MODEL_ARCH_NAMES.values())


def llama_library() -> Path | None:
    """The llama.cpp shared library llama-cpp-python loads, or None where it cannot be found."""
    override = os.environ.get(LIB_PATH_ENV)
    folders = [Path(override)] if override else []
    spec = importlib.util.find_spec("llama_cpp")
    if spec is not None and spec.submodule_search_locations:
        folders.append(Path(next(iter(spec.submodule_search_locations))) / "lib")
    for folder in folders:
        for name in LIBRARY_NAMES:
            if (folder / name).is_file():
                return (folder / name).resolve()
    return None


@functools.cache
def _library_bytes(path: Path, size: int, mtime_ns: int) -> bytes:
    return path.read_bytes()


def _library() -> bytes | None:
    path = llama_library()
    if path is None:
        return None
    stat = path.stat()
    return _library_bytes(path, stat.st_size, stat.st_mtime_ns)


def knows_architecture(architecture: str) -> bool | None:
    """Whether the installed llama.cpp builds `architecture`; None where its library cannot be read."""
    data = _library()
    if data is None:
        return None
    name = architecture.encode("utf-8")
    if b"\0" + name + b"\0" in data:
        return True
    return architecture in GGUF_ARCHITECTURES and name + b"\0" in data


def known_architectures() -> list[str]:
    """The gguf package's architectures that the installed llama.cpp knows (for `sharpen doctor`)."""
    return sorted(name for name in GGUF_ARCHITECTURES if knows_architecture(name))
