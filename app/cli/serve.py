"""`sharpen serve`: the OpenAI-compatible server (app/server), on uvicorn."""

from __future__ import annotations

import argparse
import errno
import ipaddress
import os
import socket

from app.cli.common import EXIT_USAGE, Command, fail, service, setting_flag

API_KEY_VARIABLE = "SHARPEN_API_KEY"


def serve_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", type=setting_flag("server.host"), help="address to listen on (server.host)")
    parser.add_argument("--port", type=setting_flag("server.port"), help="port to listen on (server.port)")
    parser.add_argument(
        "--queue", type=setting_flag("server.queue"), help="requests each engine keeps waiting (server.queue)"
    )
    parser.add_argument(
        "--api-key",
        help=f"the key clients must send (Authorization: Bearer KEY); default ${API_KEY_VARIABLE}; "
        "needed for any address but loopback",
    )


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def address_problem(host: str, port: int) -> str:
    """Why the server could not listen on host:port ("" if it can): said in one line before uvicorn starts."""
    try:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
            probe.bind((host, port))
    except socket.gaierror:
        return f"--host {host}: no such address on this machine"
    except OSError as error:
        if error.errno == errno.EADDRINUSE:
            return f"port {port} on {host} is in use (another server?): choose another with --port"
        return f"cannot listen on {host}:{port}: {error.strerror or error}"
    return ""


def serve(args: argparse.Namespace) -> int:
    sharpen = service()
    section = sharpen.config.server
    host = args.host or section.host
    port = args.port or section.port
    queue = section.queue if args.queue is None else args.queue
    api_key = args.api_key or os.environ.get(API_KEY_VARIABLE) or None
    if not is_loopback(host) and not api_key:
        return fail(
            f"--host {host} can be reached from other machines: give --api-key KEY (or set {API_KEY_VARIABLE})",
            EXIT_USAGE,
        )
    problem = address_problem(host, port)
    if problem:
        return fail(problem)
    # Imported here: the server's libraries are needed by this command only.
    import uvicorn

    from app.server.app import ServerOptions, build_app

    app = build_app(sharpen, ServerOptions(api_key=api_key, queue=queue))
    shown = f"[{host}]" if ":" in host else host
    print(f"sharpen: serving on http://{shown}:{port}/v1 (OpenAI-compatible; Ctrl+C stops)", flush=True)
    uvicorn.run(app, host=host, port=port, log_level="warning", timeout_graceful_shutdown=2)
    return 0


COMMANDS = (Command("serve", "serve the router over an OpenAI-compatible HTTP API", serve_arguments, serve),)
