"""A loopback HTTP server that serves repos in the Hugging Face Hub's layout, for the real client.

It answers what huggingface_hub asks for: `HEAD/GET /{repo}/resolve/{revision}/{file}` (with the
commit, etag and size headers, and Range requests), `GET /api/models/{repo}/revision/{revision}` and
`GET /api/models/{repo}/tree/{revision}` (file sizes where `?blobs=True` asks, as the Hub gives them); unknown
repos and files get the Hub's error codes. Faults are injected per file: drop the connection at a byte of the
file (and then, if asked, answer 503 until the test clears it: a server gone away mid-download), or serve
corrupted bytes under the right hash.
Every request is recorded, so tests can assert on what the client did (a Range request on resume).
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlparse


@dataclass
class HubFile:
    content: bytes
    lfs: bool = True  # LFS files are addressed by sha256, small git files by their git blob id
    drop_after: int | None = None  # close the connection when it reaches this byte of the file, `drops` times
    drops: int = 0
    gone_after_drops: bool = False  # once the drops are spent, answer 503 (the server went away)
    corrupt: bool = False  # serve other bytes of the same size under the true hash

    @property
    def etag(self) -> str:
        if self.lfs:
            return hashlib.sha256(self.content).hexdigest()
        return hashlib.sha1(f"blob {len(self.content)}\0".encode() + self.content).hexdigest()


@dataclass
class HubRepo:
    files: dict[str, HubFile]
    commit: str = "0123456789abcdef0123456789abcdef01234567"


@dataclass
class Request:
    method: str
    path: str
    range: str | None


@dataclass
class FakeHub:
    repos: dict[str, HubRepo] = field(default_factory=dict)
    requests: list[Request] = field(default_factory=list)
    url: str = ""

    def add(self, repo_id: str, files: dict[str, HubFile]) -> HubRepo:
        self.repos[repo_id] = HubRepo(files)
        return self.repos[repo_id]

    def downloads(self, file: str) -> list[Request]:
        return [r for r in self.requests if r.method == "GET" and r.path.endswith("/" + file)]


def _handler(hub: FakeHub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:
            pass

        def do_HEAD(self) -> None:
            self._answer(head=True)

        def do_GET(self) -> None:
            self._answer(head=False)

        def _error(self, status: int, code: str, message: str) -> None:
            body = json.dumps({"error": message}).encode()
            self.send_response(status)
            self.send_header("X-Error-Code", code)
            self.send_header("X-Error-Message", message)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def _json(self, payload: object) -> None:
            body = json.dumps(payload).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _answer(self, *, head: bool) -> None:
            url = urlparse(self.path)
            path = unquote(url.path)
            hub.requests.append(Request(self.command, path, self.headers.get("Range")))
            parts = path.strip("/").split("/")
            if parts[:2] == ["api", "models"]:
                return self._api(parts[2:], blobs=parse_qs(url.query).get("blobs", [""])[0].lower() == "true")
            if len(parts) >= 5 and parts[2] == "resolve":
                return self._file("/".join(parts[:2]), parts[3], "/".join(parts[4:]), head)
            return self._error(404, "EntryNotFound", "no such route")

        def _api(self, parts: list[str], *, blobs: bool) -> None:
            repo_id = "/".join(parts[:2])
            repo = hub.repos.get(repo_id)
            if repo is None:
                return self._error(404, "RepoNotFound", f"Repository {repo_id} not found")
            if parts[2:3] == ["revision"]:
                return self._json(
                    {
                        "id": repo_id,
                        "modelId": repo_id,
                        "sha": repo.commit,
                        "siblings": [
                            {"rfilename": name} | ({"size": len(file.content)} if blobs else {})
                            for name, file in repo.files.items()
                        ],
                    }
                )
            if parts[2:3] == ["tree"]:
                entries = []
                for name, file in repo.files.items():
                    entry: dict[str, object] = {"type": "file", "path": name, "size": len(file.content)}
                    entry["oid"] = hashlib.sha1(file.content).hexdigest()
                    if file.lfs:
                        entry["lfs"] = {"oid": file.etag, "size": len(file.content), "pointerSize": 134}
                    entries.append(entry)
                return self._json(entries)
            return self._error(404, "EntryNotFound", "no such api route")

        def _file(self, repo_id: str, revision: str, name: str, head: bool) -> None:
            repo = hub.repos.get(repo_id)
            if repo is None:
                return self._error(404, "RepoNotFound", f"Repository {repo_id} not found")
            if revision not in ("main", repo.commit):
                return self._error(404, "RevisionNotFound", f"Revision {revision} not found")
            file = repo.files.get(name)
            if file is None:
                return self._error(404, "EntryNotFound", f"{name} does not exist")
            if file.gone_after_drops and file.drops == 0 and not head:
                return self._error(503, "Unavailable", "the server went away")
            content = bytes(b ^ 0xFF for b in file.content) if file.corrupt else file.content
            start = 0
            requested = self.headers.get("Range")
            if requested and requested.startswith("bytes="):
                start = int(requested.removeprefix("bytes=").split("-")[0])
            body = content[start:]
            self.send_response(206 if start else 200)
            self.send_header("X-Repo-Commit", repo.commit)
            self.send_header("ETag", f'"{file.etag}"')
            self.send_header("Content-Length", str(len(body)))
            if start:
                self.send_header("Content-Range", f"bytes {start}-{len(content) - 1}/{len(content)}")
            self.send_header("Accept-Ranges", "bytes")
            self.end_headers()
            if head:
                return None
            if file.drop_after is not None and file.drops > 0 and start < file.drop_after < len(content):
                file.drops -= 1
                self.wfile.write(content[start : file.drop_after])
                self.wfile.flush()
                self.close_connection = True
                return None
            self.wfile.write(body)
            return None

    return Handler


class RunningHub:
    """A FakeHub served on 127.0.0.1 from a background thread."""

    def __init__(self) -> None:
        self.hub = FakeHub()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self.hub))
        self.hub.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FakeHub:
        self.thread.start()
        return self.hub

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
