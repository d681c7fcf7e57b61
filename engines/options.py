"""Declared options: each knob's default, help line and check, written once on the dataclass that uses it.

The config file, the command line and the TUI all read these declarations (app/storage/config.py builds its
registry from them), so a new option is one line. Plain Python, no dependencies: engines declare, app reads.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import field
from typing import Any

Check = Callable[[Any], str | None]


def at_least(low: float) -> Check:
    return lambda v: None if v >= low else f"must be at least {low}"


def between(low: float, high: float) -> Check:
    return lambda v: None if low <= v <= high else f"must be between {low} and {high}"


def not_empty(v: Any) -> str | None:
    return None if str(v).strip() else "must not be empty"


def one_of(*choices: str) -> Check:
    return lambda v: None if v in choices else f"must be one of {', '.join(choices)}"


def option(
    default: Any,
    help: str,
    check: Check | None = None,
    *,
    off: Any = None,
    metavar: str = "",
    read_by: tuple[str, ...] = (),
) -> Any:
    """A dataclass field that is a user option. `off` is how a config file or a flag spells a default of
    None (TOML has no null): `threshold = 0` is "no threshold". `metavar` names the value in a flag's help.
    `read_by`: for an option a single draft may set, the engines that read it ("ar", "diffusion"); a draft
    that sets one only one engine reads is drafted by that engine (app/domain/option_engines.py)."""
    metadata = {"help": help, "check": check, "off": off, "metavar": metavar, "read_by": read_by}
    return field(default=default, metadata=metadata)


def options(cls: type) -> list[dataclasses.Field[Any]]:
    """The fields of `cls` declared with option(), in order (plain fields are internal knobs)."""
    return [item for item in dataclasses.fields(cls) if "help" in item.metadata]


def from_options(value: Any, item: dataclasses.Field[Any]) -> Any:
    """A value as the config file spells it, as the dataclass holds it (`off` becomes None)."""
    off = item.metadata.get("off")
    return None if off is not None and value == off else value


def to_options(value: Any, item: dataclasses.Field[Any]) -> Any:
    """A value as the dataclass holds it, as the config file spells it (None becomes `off`)."""
    off = item.metadata.get("off")
    return off if value is None and off is not None else value
