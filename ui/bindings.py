"""The app's and the editor's bindings, and the keymap that applies config.toml's [keys], all made from the
declarations in app/storage/keys.py."""

from __future__ import annotations

from textual.binding import Binding, BindingType

from app.storage.config import KeysSection
from app.storage.keys import KEYS, KeyUse, Owner


def _binding_id(use: KeyUse) -> str:
    return f"sharpen.{use.action}"


def bindings(owner: Owner) -> list[BindingType]:
    """The bindings of the app or the editor, on their default keys (the keymap remaps them)."""
    return [
        Binding(
            key.default,
            use.action,
            use.label,
            show=use.show_in_footer,
            priority=use.priority,
            id=_binding_id(use),
        )
        for key in KEYS
        for use in key.uses
        if use.owner == owner
    ]


def keymap(keys: KeysSection) -> dict[str, str]:
    """Every binding's keys as configured, by binding id."""
    return {_binding_id(use): getattr(keys, key.name) for key in KEYS for use in key.uses}


def key_rows(keys: KeysSection) -> list[tuple[str, str, str]]:
    """For the help screen: each key setting's name, its keys as configured, and what it does."""
    return [(key.name, getattr(keys, key.name), key.help) for key in KEYS]


def key_label(keys: KeysSection, name: str) -> str:
    """How a hint names the keys configured for `name` ("ctrl+enter / ctrl+y", "esc")."""
    return " / ".join(key.strip().replace("escape", "esc") for key in getattr(keys, name).split(","))
