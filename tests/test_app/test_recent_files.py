"""The recent-files list: newest first, each file once, at most ten, and a broken list is an empty one."""

from __future__ import annotations

import json
from pathlib import Path

from app.storage.recent_files import RecentFiles


def test_newest_first_each_once_and_at_most_ten(tmp_path: Path) -> None:
    recent = RecentFiles(tmp_path / "state" / "recent_files.json")
    assert recent.load() == []
    for number in range(12):
        recent.add(tmp_path / f"note{number}.txt")
    recent.add(tmp_path / "note5.txt")
    files = recent.load()
    assert len(files) == 10
    assert files[0] == tmp_path / "note5.txt" and files[1] == tmp_path / "note11.txt"
    assert files.count(tmp_path / "note5.txt") == 1
    assert tmp_path / "note0.txt" not in files and tmp_path / "note1.txt" not in files
    # Written atomically: no temporary file left next to it.
    assert [path.name for path in (tmp_path / "state").iterdir()] == ["recent_files.json"]


def test_a_relative_path_is_kept_absolute(tmp_path: Path) -> None:
    recent = RecentFiles(tmp_path / "recent.json")
    recent.add(Path("relative.md"))
    assert recent.load()[0].is_absolute() and recent.load()[0].name == "relative.md"


def test_a_broken_list_is_an_empty_one(tmp_path: Path) -> None:
    path = tmp_path / "recent.json"
    recent = RecentFiles(path)
    for broken in ("not json", "[1, 2]", json.dumps({"files": "a.txt"}), json.dumps({"files": [3, "", "b.txt"]})):
        path.write_text(broken)
        assert recent.load() == ([Path("b.txt")] if "b.txt" in broken else [])
    path.write_bytes(b"\xff\xfe")
    assert recent.load() == []
    recent.add(tmp_path / "c.txt")
    assert recent.load() == [tmp_path / "c.txt"]
