"""The requests the editor's keys make: a draft at the cursor and a rewrite of the selection, each carrying the
document around it (the service fits it to the model)."""

from __future__ import annotations

from textual.widgets import TextArea

from app.domain.draft_request import DraftRequest
from router.request import EngineName


def draft_at_cursor(editor: TextArea, instruction: str, tokens: int, engine: EngineName | None = None) -> DraftRequest:
    """A draft at the cursor; `engine` None: the router chooses."""
    cursor = editor.cursor_location
    before = editor.get_text_range((0, 0), cursor)
    after = editor.get_text_range(cursor, editor.document.end)
    return DraftRequest("draft", instruction, before=before, after=after, tokens=tokens, engine=engine)


def rewrite_of_selection(
    editor: TextArea, instruction: str, tokens: int, engine: EngineName | None = None
) -> DraftRequest:
    start, end = sorted(editor.selection)
    return DraftRequest(
        "infill",
        instruction,
        before=editor.get_text_range((0, 0), start),
        after=editor.get_text_range(end, editor.document.end),
        selection=editor.selected_text,
        tokens=tokens,
        engine=engine,
    )
