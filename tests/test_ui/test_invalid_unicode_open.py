"""The editor opens a file whose bytes are not UTF-8 (#31): U+FFFD in their place, and a note that says so."""

from __future__ import annotations

import os
from pathlib import Path

from ui_support import AppFactory, make_config


async def test_a_file_that_is_not_utf8_opens_with_replacement_characters_and_a_note(
    make_app: AppFactory, tmp_path: Path
) -> None:
    document = tmp_path / "letter.txt"
    document.write_bytes(b"Dear Sam,\n\xff\xfe thanks \xe9\n")
    app = make_app(config=make_config(autocomplete=False), document=document)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert app.files.document == document, "the file is open, not refused"
        assert app.editor.text == "Dear Sam,\n\ufffd\ufffd thanks \ufffd\n"
        notes = [n for n in app._notifications if "not UTF-8" in n.message]
        assert len(notes) == 1 and notes[0].severity == "warning"
        assert "letter.txt" in notes[0].message and "saving" in notes[0].message
    # Opening alone changes nothing on disk.
    assert document.read_bytes() == b"Dear Sam,\n\xff\xfe thanks \xe9\n"


async def test_a_file_whose_name_is_not_utf8_opens_and_autosaves(make_app: AppFactory, tmp_path: Path) -> None:
    # `sharpen FILE` hands the name over with its bytes (Python's surrogateescape), so that the file opens.
    document = Path(os.fsdecode(os.fsencode(tmp_path) + b"/notes-\xff.txt"))
    document.write_bytes(b"plain text\n")
    app = make_app(config=make_config(autocomplete=False), document=document)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert app.files.document == document and app.editor.text == "plain text\n"
        app.editor.move_cursor(app.editor.document.end)
        await pilot.press(*"more")
        app.files.autosave()
        assert app.files.store.recovery(document) is not None, "the autosave is kept under the path's own bytes"
        assert not [n for n in app._notifications if n.severity == "error"]
