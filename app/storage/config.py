"""Sharpen's settings: typed, with defaults, read from config.toml and validated key by key.

Every setting is a field of a section dataclass below, declared with engines.options.option(): its
metadata carries the help text and the check. The draft options are DiffusionSettings' own (the
[diffusion] section extends it). The registry of dotted keys ("ar.n_ctx") is derived from these
dataclasses, so adding a setting is one line.
"""

from __future__ import annotations

import dataclasses
import functools
import threading
import tomllib
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomli_w

from app.storage.atomic import write_atomic
from app.storage.keys import KEYS
from engines.diffusion.load_settings import DiffusionLoadSettings
from engines.diffusion.settings import DiffusionSettings
from engines.llama_ar import LlamaSettings
from engines.options import Check, at_least, between, from_options, not_empty, one_of, option, options, to_options
from router.request import Policy, Quality


class ConfigError(Exception):
    """A config file or value Sharpen cannot use. The message names the file and the key."""


@dataclass(frozen=True)
class ModelsSection:
    complete: str = option(
        "smollm2-135m-instruct",
        "model for autocomplete and short instructions: a catalogue name, a .gguf path or a found model's name",
        not_empty,
    )
    write: str = option(
        "",
        "model for drafts, rewrites and chat replies through the AR engine (ghost text keeps models.complete): a "
        "catalogue name (an AR model, or a LoRA adapter for one such as sharpen-write), a .gguf path, a found "
        "model's name or an openai: source; empty means the complete model, with the writing adapter the "
        "catalogue ships for it (sharpen-write for the embedded model): name the complete model itself to write "
        "without one",
    )
    draft: str = option(
        "sharpen-draft",
        "diffusion model for drafts and rewrites: a catalogue name, a .gguf path, a found model's name, a "
        "checkpoint folder, or a draft engine on another machine (sharpen:URL for another sharpen serve, "
        "openai:URL#MODEL for a text-only OpenAI-compatible server); empty means none configured",
    )
    folders: str = option(
        "",
        "folders of GGUF files listed and usable beside the catalogue (as LM Studio's models folder, any layout), "
        "separated as PATH is (':'; ';' on Windows); Ollama's store, LM Studio's folders and the HF cache are "
        "looked in without it",
    )
    check_fit: bool = option(True, "refuse to load a catalogue model that needs more RAM/GPU memory than is free")


@dataclass(frozen=True)
class ArSection(LlamaSettings):
    """How the AR engine is loaded: the options LlamaSettings declares (ar.n_gpu_layers also serves the
    diffusion engine)."""


@dataclass(frozen=True)
class CompleteSection:
    max_tokens: int = option(32, "longest completion, in tokens", between(1, 4096))
    temperature: float = option(0.0, "sampling temperature for completions; 0 is greedy", between(0.0, 2.0))


@dataclass(frozen=True)
class ChatSection:
    max_tokens: int = option(256, "longest reply to an instruction, in tokens", between(1, 8192))
    temperature: float = option(0.0, "sampling temperature for instructions; 0 is greedy", between(0.0, 2.0))
    no_repeat_ngram: int = option(
        3,
        "AR replies and drafts never generate a run of this many tokens twice (a local model's); 0 is off",
        between(0, 16),
        metavar="N",
    )
    fact_tries: int = option(
        6,
        "an AR draft with an instruction is drafted again, with another seed, while it leaves out a fact the "
        "instruction asks for (a time, a day, a date, a sum, a code, a name) or a quarter of what it is about "
        "(its content words), takes another stance than the one asked (a decline, an acceptance, an apology) or "
        "copies the request back, up to this many tries in all, those after the first written to at least half "
        "the length asked (into a document, a try after drafts that missed the stance opens with words that "
        "take it); the best is kept and the reply says what is still missing. 1 is off: one draft, streamed as "
        "it comes",
        between(1, 16),
        metavar="N",
    )
    continue_drafts: bool = option(
        True,
        "of those tries, one after a draft that takes the stance asked but leaves something out carries that "
        "draft on from before its sign-off (kept after what it adds), told what it left out, rather than starting "
        "again; each draft is carried on once",
    )


@dataclass(frozen=True)
class _DraftLength:
    tokens: int = option(128, "default draft length, in tokens", between(1, 8192))


# Bases listed last come first: the draft options, the draft length, then how the engine is loaded.
@dataclass(frozen=True)
class DiffusionSection(DiffusionLoadSettings, _DraftLength, DiffusionSettings):
    """The draft options DiffusionSettings declares, the default draft length, and how the diffusion engine
    is loaded (DiffusionLoadSettings' options)."""


@dataclass(frozen=True)
class RouterSection:
    policy: Policy = option(
        "measured",
        "measured (a draft goes to the engine estimated faster among those whose measured drafts pass the quality "
        "gate), design (diffusion for every draft that fits the latency budget), fastest, or quality",
    )
    quality: Quality = option("balanced", "refinement passes per draft token: fast, balanced or best")
    auto_calibrate: bool = option(
        True,
        "before the first draft with a model whose costs are only estimated, measure it on this machine (about half "
        "a minute for the embedded models on 2 cores), so routes follow this machine's costs",
    )
    latency_budget_s: float = option(
        20.0,
        "a draft estimated slower than this on diffusion goes to AR when AR is faster; 0 is no budget",
        at_least(0.0),
    )
    quality_margin: float = option(
        0.3,
        "under measured and design, drafts go to AR when the draft model's measured drafts sit more than this "
        "behind AR's (0: AR's own drafts, 1: shuffled words; the catalogue's drafts_position)",
        between(0.0, 1.0),
    )
    on_topic_margin: float = option(
        0.1,
        "under measured, drafts go to AR when the draft model is on topic for a smaller share of unseen "
        "instructions than AR's, by more than this (the catalogue's drafts_on_topic)",
        between(0.0, 1.0),
    )
    repeats_margin: float = option(
        0.05,
        "under measured, drafts go to AR when a larger share of the draft model's word 3-grams repeat than of "
        "AR's, by more than this (the catalogue's drafts_repeats)",
        between(0.0, 1.0),
    )
    faithful_margin: float = option(
        0.1,
        "under measured, drafts go to AR when the draft model's drafts into a document state a smaller share "
        "of the facts asked than AR's, or turn around a larger share of the stances asked, by more than this "
        "(the catalogue's drafts_facts and drafts_flips)",
        between(0.0, 1.0),
    )


@dataclass(frozen=True)
class ServerSection:
    host: str = option("127.0.0.1", "address `sharpen serve` listens on; any but loopback needs an API key", not_empty)
    port: int = option(8765, "port `sharpen serve` listens on", between(1, 65535))
    # Made for scripts: a batch of drafts sent at once waits its turn (a 429 only beyond it); Ollama queues 512.
    queue: int = option(
        64, "requests each engine keeps waiting behind the one it runs; more are answered 429", between(0, 1024)
    )


@dataclass(frozen=True)
class UiSection:
    autocomplete: bool = option(True, "show ghost-text completions while typing")
    debounce_ms: int = option(200, "pause after a keystroke before a completion is asked for", between(0, 2000))
    suggestion_tokens: int = option(24, "longest ghost-text suggestion, in tokens", between(1, 256))
    max_chars_right_of_cursor: int = option(
        8, "no automatic suggestion when more characters than this follow the cursor on its line", at_least(0)
    )
    autosave_s: float = option(5.0, "seconds between autosaves of the open document", between(0.5, 600.0))
    theme: str = option(
        "textual-dark",
        "the TUI's colour theme, one of Textual's (the command palette's Change theme lists them and remembers the "
        "choice here)",
        not_empty,
    )


# The [keys] section: one string field per key declared in app/storage/keys.py, made from the declarations (the
# type checker sees a frozen dataclass whose fields are all strings).
if typing.TYPE_CHECKING:

    class KeysSection:
        __dataclass_fields__: typing.ClassVar[dict[str, dataclasses.Field[Any]]]

        def __init__(self, **keys: str) -> None: ...

        def __getattr__(self, name: str) -> str: ...

else:
    KeysSection = dataclasses.make_dataclass(
        "KeysSection",
        [(key.name, str, option(key.default, key.help, not_empty)) for key in KEYS],
        frozen=True,
        namespace={"__module__": __name__},
    )


@dataclass(frozen=True)
class Config:
    models: ModelsSection = field(default_factory=ModelsSection)
    ar: ArSection = field(default_factory=ArSection)
    complete: CompleteSection = field(default_factory=CompleteSection)
    chat: ChatSection = field(default_factory=ChatSection)
    diffusion: DiffusionSection = field(default_factory=DiffusionSection)
    router: RouterSection = field(default_factory=RouterSection)
    server: ServerSection = field(default_factory=ServerSection)
    ui: UiSection = field(default_factory=UiSection)
    keys: KeysSection = field(default_factory=KeysSection)


USER_CATALOGUE = "catalogue"


@dataclass(frozen=True)
class SettingSpec:
    key: str
    type: type
    default: Any
    help: str
    check: Check | None


def _section_classes() -> dict[str, type]:
    return typing.get_type_hints(Config)


@functools.cache
def settings_registry() -> dict[str, SettingSpec]:
    """Every setting by dotted key. A setting typed with a Literal takes exactly the Literal's values; one
    that may be None takes its `off` spelling instead."""
    registry: dict[str, SettingSpec] = {}
    for section, section_cls in _section_classes().items():
        hints = typing.get_type_hints(section_cls)
        for item in options(section_cls):
            key = f"{section}.{item.name}"
            kind, check = hints[item.name], item.metadata["check"]
            if type(None) in typing.get_args(kind):
                (kind,) = (arg for arg in typing.get_args(kind) if arg is not type(None))
            if typing.get_origin(kind) is typing.Literal:
                kind, check = str, one_of(*typing.get_args(kind))
            registry[key] = SettingSpec(key, kind, to_options(item.default, item), item.metadata["help"], check)
    return registry


class BadValue(ValueError):
    """A value a setting refuses; the message says what it must be ("must be at least 1, got 0")."""


def check_value(spec: SettingSpec, value: Any) -> Any:
    """`value` as the setting's type, or BadValue."""
    expected = spec.type
    if expected is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, expected) or (expected is not bool and isinstance(value, bool)):
        raise BadValue(f"must be {_type_name(expected)}, got {value!r}")
    if spec.check is not None:
        problem = spec.check(value)
        if problem:
            raise BadValue(f"{problem}, got {value!r}")
    return value


def convert_text(spec: SettingSpec, text: str) -> Any:
    """A command-line string as the setting's value, or BadValue."""
    try:
        if spec.type is bool:
            lowered = text.strip().lower()
            if lowered not in {"true", "false", "on", "off", "yes", "no", "1", "0"}:
                raise ValueError(text)
            value: Any = lowered in {"true", "on", "yes", "1"}
        else:
            value = spec.type(text)
    except ValueError:
        raise BadValue(f"must be {_type_name(spec.type)}, got {text!r}") from None
    return check_value(spec, value)


def _validate(spec: SettingSpec, value: Any, where: str) -> Any:
    try:
        return check_value(spec, value)
    except BadValue as error:
        raise ConfigError(f"{where}: {spec.key} {error}") from None


def _type_name(kind: type) -> str:
    return {int: "a whole number", float: "a number", str: "a string", bool: "true or false"}[kind]


def parse_value(spec: SettingSpec, text: str, where: str) -> Any:
    """Turn a command-line string into a setting's value."""
    try:
        return convert_text(spec, text)
    except BadValue as error:
        raise ConfigError(f"{where}: {spec.key} {error}") from None


# Keys an earlier Sharpen wrote, read as the setting that replaced them (which wins where both are set;
# among old keys, the first listed here). diffusion.prefix_cache = false turned every cache off.
REPLACED_KEYS: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "diffusion.prefix_cache": ("diffusion.cache", lambda on: {True: "dual", False: "none"}.get(on, on)),
    "diffusion.torch_cache": ("diffusion.cache", lambda mode: mode),
}


def _flatten(raw: dict[str, Any], where: str) -> dict[str, Any]:
    registry = settings_registry()
    flat: dict[str, Any] = {}
    for section, table in raw.items():
        if section == USER_CATALOGUE:
            continue  # the user's model entries: validated by user_catalogue()
        if not isinstance(table, dict):
            raise ConfigError(f"{where}: {section!r} must be a [section] table; known sections: {_sections(registry)}")
        # Old keys in REPLACED_KEYS's order, whatever the file's: the first one given decides.
        for old_key, (new_key, convert) in REPLACED_KEYS.items():
            old_section, old_name = old_key.split(".", 1)
            if old_section == section and old_name in table and new_key.split(".", 1)[1] not in table:
                value = convert(table[old_name])
                flat.setdefault(new_key, _validate(registry[new_key], value, f"{where} ({old_key})"))
        for name, value in table.items():
            key = f"{section}.{name}"
            if key in REPLACED_KEYS:
                continue
            spec = registry.get(key)
            if spec is None:
                raise ConfigError(f"{where}: unknown key {key!r}; run `sharpen config show` to list the known keys")
            flat[key] = _validate(spec, value, where)
    return flat


def _sections(registry: dict[str, SettingSpec]) -> str:
    return ", ".join(sorted({k.split(".")[0] for k in registry}))


def config_from_flat(flat: dict[str, Any]) -> Config:
    def section(name: str, cls: type) -> Any:
        given = [(item, flat[f"{name}.{item.name}"]) for item in options(cls) if f"{name}.{item.name}" in flat]
        return cls(**{item.name: from_options(value, item) for item, value in given})

    return Config(**{name: section(name, cls) for name, cls in _section_classes().items()})


def read_raw(path: Path) -> dict[str, Any]:
    """The TOML tables as written in the file (empty if there is no file)."""
    try:
        data = path.read_bytes()
    except (FileNotFoundError, NotADirectoryError):
        return {}
    except OSError as error:
        raise ConfigError(f"{path}: cannot read the config file ({error.strerror})") from None
    try:
        return tomllib.loads(data.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise ConfigError(f"{path}: not valid TOML ({error}); fix or delete the file") from None


def load_config(path: Path) -> Config:
    raw = read_raw(path)
    user_catalogue(raw, path)
    return config_from_flat(_flatten(raw, str(path)))


def user_catalogue(raw: dict[str, Any], path: Path) -> dict[str, Any]:
    """The [catalogue.NAME] tables of a config file (the user's own models), checked."""
    from models.catalogue import CatalogueError, catalogue

    tables = raw.get(USER_CATALOGUE, {})
    if not isinstance(tables, dict):
        raise ConfigError(f"{path}: [{USER_CATALOGUE}] must hold one [{USER_CATALOGUE}.NAME] table per model")
    try:
        catalogue(tables, str(path))
    except CatalogueError as error:
        raise ConfigError(str(error)) from None
    return tables


# The editor's theme worker and a model switch may both write config.toml: one read-modify-write at a time.
_WRITING = threading.Lock()


def set_value(path: Path, key: str, text: str) -> Any:
    """Validate `text` for `key` and write it into the config file atomically. Returns the stored value."""
    with _WRITING:
        return _set_value(path, key, text)


def _set_value(path: Path, key: str, text: str) -> Any:
    registry = settings_registry()
    spec = registry.get(key)
    if spec is None:
        raise ConfigError(f"unknown key {key!r}; known keys: {', '.join(sorted(registry))}")
    raw = read_raw(path)
    _flatten(raw, str(path))  # refuse to rewrite a file that is already invalid
    value = parse_value(spec, text, str(path))
    section, name = key.split(".", 1)
    table = raw.setdefault(section, {})
    table[name] = value
    for old_key, (new_key, _) in REPLACED_KEYS.items():
        if new_key == key:
            table.pop(old_key.split(".", 1)[1], None)
    save_raw(path, raw)
    return value


def save_raw(path: Path, raw: dict[str, Any]) -> None:
    try:
        write_atomic(path, tomli_w.dumps(raw).encode("utf-8"))
    except OSError as error:
        reason = error.strerror or str(error)
        raise ConfigError(
            f"{path}: cannot write the config file ({reason}). Make its folder writable, "
            f"or set SHARPEN_HOME to a writable folder"
        ) from None


def render_config(config: Config) -> str:
    tables = {
        name: {item.name: to_options(getattr(section, item.name), item) for item in options(type(section))}
        for name, section in ((item.name, getattr(config, item.name)) for item in dataclasses.fields(config))
    }
    return tomli_w.dumps(tables)
