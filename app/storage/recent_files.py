"""The files opened or saved most recently, newest first: a small JSON file in the state dir, written atomically.

A missing or unreadable list is an empty one (it is only a convenience); a path is kept once, absolute.
"""

from __future__ import annotations

import json
from pathlib import Path

from app.storage.atomic import write_atomic

LIMIT = 10


class RecentFiles:
    def __init__(self, path: Path, limit: int = LIMIT) -> None:
        self.path = path
        self.limit = limit

    def load(self) -> list[Path]:
        """The recent files, newest first (at most `limit`)."""
        try:
            record = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return []
        files = record.get("files") if isinstance(record, dict) else None
        if not isinstance(files, list):
            return []
        return [Path(name) for name in files if isinstance(name, str) and name][: self.limit]

    def add(self, document: Path) -> list[Path]:
        """Put `document` first (once), keep the newest `limit`, write the list; returns it."""
        document = document.expanduser().absolute()
        files = [document, *(path for path in self.load() if path != document)][: self.limit]
        record = {"files": [str(path) for path in files]}
        write_atomic(self.path, json.dumps(record, indent=1).encode("utf-8"))
        return files
