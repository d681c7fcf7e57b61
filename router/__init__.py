"""Decides which engine serves a request (see docs/architecture.md). Not built yet: issue "The router"."""
