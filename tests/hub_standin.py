"""A stand-in for the Hugging Face Hub on loopback: the two endpoints the plan reads (a model's
info with safetensors metadata, and a file from the repo), answering from the responses recorded
under tests/fixtures/hub/. The real huggingface_hub client talks to it over HTTP (HF_ENDPOINT),
so its parsing, its redirects to the canonical id and its errors are the real ones.

Like the Hub, it resolves repo ids case-insensitively and names the canonical id in its answer;
an unknown repo gets the Hub's 404 (X-Error-Code: RepoNotFound), a gated one its 401.
"""

from __future__ import annotations

import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar
from urllib.parse import unquote, urlparse

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "hub"


def recorded() -> dict[str, dict]:
    """lower-cased repo id -> {"model_info": ..., "config": ..., "gated": bool}."""
    repos = {}
    for path in sorted(FIXTURES.glob("*.json")):
        record = json.loads(path.read_text())
        repos[record["model_info"]["id"].lower()] = record
    return repos


class _Handler(BaseHTTPRequestHandler):
    repos: ClassVar[dict[str, dict]] = {}
    requests: ClassVar[list[str]] = []
    authorizations: ClassVar[list[str | None]] = []  # each request's Authorization header (None: anonymous)

    def log_message(self, *args):  # quiet
        pass

    def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None, head: bool = False) -> None:
        self.send_response(status)
        for key, value in {"Content-Type": "application/json", "Content-Length": str(len(body)),
                           **(headers or {})}.items():
            self.send_header(key, value)
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def _error(self, status: int, code: str, message: str, head: bool) -> None:
        # source: huggingface_hub 2.4.0 utils/_http.py hf_raise_for_status reads X-Error-Code and
        # X-Error-Message; the JSON body {"error": MESSAGE} is what it reads when the header is absent.
        self._send(status, json.dumps({"error": message}).encode(), {"X-Error-Code": code,
                                                                     "X-Error-Message": message}, head)

    def _route(self, head: bool) -> None:
        path = unquote(urlparse(self.path).path)
        self.requests.append(f"{self.command} {self.path}")
        self.authorizations.append(self.headers.get("Authorization"))
        parts = path.strip("/").split("/")
        if parts[:2] == ["api", "models"]:
            repo_id, file = "/".join(parts[2:4]), None
        elif "resolve" in parts:
            at = parts.index("resolve")
            repo_id, file = "/".join(parts[:at]), "/".join(parts[at + 2:])
        else:
            # not stood in: a route the tools never call; huggingface_hub raises on the 404.
            return self._error(404, "EntryNotFound", "not a route of this stand-in", head)
        record = self.repos.get(repo_id.lower())
        if record is None:
            # source: huggingface_hub 2.4.0 utils/_http.py hf_raise_for_status: the Hub answers a missing repo
            # (to a caller without a token) with 401 and X-Error-Code RepoNotFound ("401 is misleading as it is
            # returned for ... missing repos", https://gist.github.com/Wauplin/46c27ad266b15998ce56a6603796f0b9).
            return self._error(401, "RepoNotFound", "Repository not found", head)
        if record.get("gated"):
            # source: the same function's GatedRepo branch (X-Error-Code GatedRepo on a gated repo's files).
            return self._error(401, "GatedRepo", "Access to model is restricted", head)
        info = record["model_info"]
        if file is None:
            # source: the recorded model_info (tests/fixtures/SOURCES.md).
            return self._send(200, json.dumps(info).encode(), head=head)
        if file != "config.json":
            # source: hf_raise_for_status's EntryNotFound branch (404, X-Error-Code EntryNotFound).
            return self._error(404, "EntryNotFound", f"{file} does not exist", head)
        body = json.dumps(record["config"], indent=2).encode()
        # source: the recorded config.json; X-Repo-Commit and ETag are what huggingface_hub's
        # file_download.get_hf_file_metadata reads from a resolve answer.
        return self._send(200, body, {"X-Repo-Commit": info["sha"], "ETag": f'"{hashlib.sha1(body).hexdigest()}"'},
                          head)

    def do_GET(self):
        self._route(head=False)

    def do_HEAD(self):
        self._route(head=True)


class HubStandIn:
    def __init__(self):
        handler = type("Handler", (_Handler,), {"repos": recorded(), "requests": [], "authorizations": []})
        self.requests: list[str] = handler.requests
        self.authorizations: list[str | None] = handler.authorizations
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)

    def __enter__(self) -> HubStandIn:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()
