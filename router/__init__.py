"""Decides which engine serves a request, with which settings, and why (docs/routing.md)."""
