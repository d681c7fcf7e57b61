"""Wiring and entry points: the CLI, configuration, paths and the service that the UI and CLI share."""
