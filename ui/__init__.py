"""The Textual app. Not built yet: issue "The Textual TUI"."""
