"""Engines turn a generation request into a stream of events."""
