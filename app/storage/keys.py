"""Every key Sharpen binds, declared once: its setting under [keys] in config.toml (default and help) and
what it does in the app and in the editor.

app/storage/config.py derives the [keys] section from these declarations, and ui/bindings.py the widgets' bindings
and the keymap. Plain Python: no UI library is imported here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# Where a key is bound: the app (any screen's keys reach it), the editor widget or the find bar.
Owner = Literal["app", "editor", "find_bar"]


@dataclass(frozen=True)
class KeyUse:
    """What a key does in one place: an action of the app or the editor, and its footer label."""

    owner: Owner
    action: str
    label: str
    show_in_footer: bool = False
    # A priority binding comes before the focused widget's own: the editor (a TextArea) binds ctrl+d and
    # ctrl+y itself. An action that does not apply raises SkipAction, which hands the key on.
    priority: bool = True


@dataclass(frozen=True)
class KeyDeclaration:
    """One key setting: `keys.<name>` in config.toml, and what the key does."""

    name: str
    default: str
    help: str
    uses: tuple[KeyUse, ...]


def _editor(action: str, label: str) -> tuple[KeyUse, ...]:
    return (KeyUse("editor", action, label),)


def _app(action: str, label: str, *, show_in_footer: bool = False) -> tuple[KeyUse, ...]:
    return (KeyUse("app", action, label, show_in_footer),)


KEYS: tuple[KeyDeclaration, ...] = (
    KeyDeclaration("accept_suggestion", "tab", "accept the whole suggestion", _editor("accept_suggestion", "Accept")),
    KeyDeclaration(
        "accept_word", "ctrl+right", "accept the next word of the suggestion", _editor("accept_word", "Accept word")
    ),
    KeyDeclaration(
        "dismiss",
        "escape",
        "dismiss the suggestion, draft or find bar",
        # Not a priority in the app: the editor's "dismiss the suggestion" comes first.
        (
            KeyUse("editor", "dismiss_suggestion", "Dismiss"),
            KeyUse("app", "cancel_draft", "Cancel draft", priority=False),
            KeyUse("find_bar", "close", "Close", priority=False),
        ),
    ),
    KeyDeclaration(
        "toggle_autocomplete",
        "ctrl+t",
        "turn ghost-text autocomplete on or off",
        _app("toggle_autocomplete", "Ghost on/off"),
    ),
    KeyDeclaration("draft", "ctrl+d", "draft text at the cursor", _app("draft", "Draft", show_in_footer=True)),
    KeyDeclaration("rewrite", "ctrl+r", "rewrite the selection", _app("rewrite", "Rewrite", show_in_footer=True)),
    KeyDeclaration(
        "accept_draft", "ctrl+enter,ctrl+y", "insert the finished draft", _app("accept_draft", "Insert draft")
    ),
    KeyDeclaration(
        "another_candidate",
        "ctrl+n",
        "draft another candidate of the same request (a new seed)",
        _app("another_candidate", "Another candidate"),
    ),
    # The editor binds ctrl+e to the end of the line: with no draft in the panel the key is handed on to it.
    KeyDeclaration(
        "other_engine",
        "ctrl+e",
        "ask the other engine for the same draft",
        _app("other_engine", "Other engine"),
    ),
    KeyDeclaration(
        "previous_candidate",
        "ctrl+pageup",
        "show the previous candidate of the draft",
        _app("previous_candidate", "Previous candidate"),
    ),
    KeyDeclaration(
        "next_candidate",
        "ctrl+pagedown",
        "show the next candidate of the draft",
        _app("next_candidate", "Next candidate"),
    ),
    KeyDeclaration("draft_history", "f4", "reopen a past draft of this document", _app("draft_history", "Past drafts")),
    KeyDeclaration(
        "playback",
        "f5",
        "play back the last draft as it was written",
        _app("playback", "Playback", show_in_footer=True),
    ),
    KeyDeclaration("save", "ctrl+s", "save the document", _app("save", "Save", show_in_footer=True)),
    # Most terminals send ctrl+shift+s as ctrl+s: f12 is the key that works everywhere.
    KeyDeclaration("save_as", "ctrl+shift+s,f12", "save the document under a new name", _app("save_as", "Save as")),
    KeyDeclaration("open", "ctrl+o", "open a file (the dialog lists the recent ones)", _app("open", "Open")),
    # The editor (a TextArea) binds none of these four.
    KeyDeclaration("doc_start", "ctrl+home", "move to the start of the document", _editor("doc_start", "Start")),
    KeyDeclaration("doc_end", "ctrl+end", "move to the end of the document", _editor("doc_end", "End")),
    KeyDeclaration(
        "select_to_start",
        "ctrl+shift+home",
        "select to the start of the document",
        _editor("select_to_start", "Select to start"),
    ),
    KeyDeclaration(
        "select_to_end",
        "ctrl+shift+end",
        "select to the end of the document",
        _editor("select_to_end", "Select to end"),
    ),
    KeyDeclaration("find", "ctrl+f", "find in the document (the find bar)", _app("find", "Find")),
    # Terminals without the kitty keyboard protocol send ctrl+h as backspace: ctrl+backslash (nano's key) works
    # everywhere.
    KeyDeclaration(
        "replace",
        "ctrl+h,ctrl+backslash",
        "find and replace (the find bar with a replace field)",
        _app("replace", "Replace"),
    ),
    KeyDeclaration(
        "find_next", "f3", "find the next match (enter in the find bar too)", _app("find_next", "Find next")
    ),
    # Many terminals send shift+f3 as f15.
    KeyDeclaration("find_previous", "shift+f3,f15", "find the previous match", _app("find_previous", "Find previous")),
    KeyDeclaration("models", "f2", "show the models and switch between them", _app("models", "Models")),
    KeyDeclaration("help", "f1", "show the keys", _app("help", "Keys", show_in_footer=True)),
    KeyDeclaration("quit", "ctrl+q", "save an autosave and quit", _app("quit_saving", "Quit")),
)
