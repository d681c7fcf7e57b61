"""`sharpen serve`: an OpenAI-compatible HTTP server on the router (Starlette on uvicorn).

Every endpoint makes the same call as the TUI and the CLI (`SharpenService.draft`, `.complete`, `.chat`) and
reads the Reply's events in a thread of its own; each engine runs one request at a time from a bounded queue.
"""
