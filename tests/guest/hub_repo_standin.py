"""The Hugging Face Hub stood in for model repos held in folders: every route huggingface_hub 2.4.0 asks when it
fetches a model (snapshot_download, hf_hub_download, HfFileSystem: all that vLLM and transformers ask of the Hub at
a model's first start), answered as that client reads them, over HTTP (HF_ENDPOINT names it), at a stated rate.

Routes and what each answer carries, with the client code that reads it (huggingface_hub 2.4.0, the version of the
boot test's lock and of this checkout's environment):
- GET /api/models/REPO[/revision/REV]: the model's info (hf_api.py HfApi.model_info; ModelInfo reads id, sha,
  siblings' rfilename). snapshot_download resolves a branch to its commit from `sha` (_snapshot_download.py).
- GET /api/models/REPO/tree/REV[/PATH]?recursive=&expand=: the entries under PATH (hf_api.py _iter_repo_tree_pages;
  RepoFile reads type, path, size, oid and lfs {oid, size, pointerSize}; RepoFolder type "directory", path, oid), one
  page (utils/_pagination.py follows a Link header, which a repo this small never needs).
- POST /api/models/REPO/paths-info/REV (form: paths, expand): the entries of those paths (hf_api.py get_paths_info).
- HEAD and GET /REPO/resolve/REV/PATH: the file (file_download.py hf_hub_url's URL). get_hf_file_metadata reads
  X-Repo-Commit (required), X-Linked-Etag or ETag (required; the cache names the blob by it) and X-Linked-Size or
  Content-Length; http_get resumes a partial download with `Range: bytes=N-` and expects 206 with Content-Range.
- Errors (utils/_http.py hf_raise_for_status): X-Error-Code RevisionNotFound (404), EntryNotFound (404, with
  X-Repo-Commit, which hf_hub_download caches under .no_exist), RepoNotFound (401, as the Hub answers a caller
  without a token).
A safetensors file, or any file over 10 MB, is stored as the Hub stores it, with Git LFS: its tree entry has the lfs
object, its resolve answer X-Linked-Etag (the sha256) and X-Linked-Size, and its git oid is its LFS pointer's
(git-lfs spec: "version https://git-lfs.github.com/spec/v1", "oid sha256:HEX", "size N"). The real Hub answers such
a resolve with a redirect to its CDN; this one serves the bytes itself (huggingface_hub downloads from either).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import threading
import time
import urllib.parse
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import BinaryIO

LFS_ABOVE = 10 * 1024 * 1024
CHUNK = 64 * 1024


def git_blob_oid(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class Repo:
    """A model repo: FOLDER's files at one commit."""

    def __init__(self, repo_id: str, folder: Path):
        self.repo_id, self.folder = repo_id, folder
        self.files: dict[str, dict] = {}
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            name = path.relative_to(folder).as_posix()
            size = path.stat().st_size
            if name.endswith(".safetensors") or size > LFS_ABOVE:
                sha256 = _sha256(path)
                pointer = f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\nsize {size}\n".encode()
                self.files[name] = {"type": "file", "path": name, "size": size, "oid": git_blob_oid(pointer),
                                    "lfs": {"oid": sha256, "size": size, "pointerSize": len(pointer)}}
            else:
                self.files[name] = {"type": "file", "path": name, "size": size, "oid": git_blob_oid(path.read_bytes())}
        self.commit = hashlib.sha1(json.dumps(self.files, sort_keys=True).encode()).hexdigest()

    def resolves(self, revision: str) -> bool:
        return revision in ("main", self.commit)

    def folders(self) -> set[str]:
        return {"/".join(name.split("/")[:i]) for name in self.files for i in range(1, name.count("/") + 1)}

    def entry(self, path: str) -> dict | None:
        if path in self.files:
            return self.files[path]
        if path in self.folders():
            return {"type": "directory", "path": path, "oid": hashlib.sha1(path.encode()).hexdigest()}
        return None

    def tree(self, under: str, recursive: bool) -> list[dict] | None:
        prefix = f"{under}/" if under else ""
        if under and under not in self.folders():
            return None
        names = sorted(n for n in {*self.files, *self.folders()} if n.startswith(prefix))
        if not recursive:
            names = [n for n in names if "/" not in n[len(prefix):]]
        return [entry for n in names if (entry := self.entry(n)) is not None]

    def info(self) -> dict:
        return {"_id": self.commit[:24], "id": self.repo_id, "modelId": self.repo_id, "sha": self.commit,
                "private": False, "gated": False, "disabled": False, "downloads": 0, "likes": 0, "tags": [],
                "lastModified": "2026-12-01T00:00:00.000Z", "createdAt": "2026-12-01T00:00:00.000Z",
                "siblings": [{"rfilename": name} for name in self.files]}


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


class Throttle:
    """One link's rate, shared by every connection through it: RATE() bytes a second (0: as fast as it goes)."""

    def __init__(self, rate: Callable[[], float]):
        self.rate, self.lock, self.free_at = rate, threading.Lock(), 0.0

    def copy(self, source: BinaryIO, sink: BinaryIO, length: int) -> None:
        while length > 0 and (chunk := source.read(min(CHUNK, length))):
            rate = self.rate()
            if rate > 0:
                with self.lock:
                    now = time.monotonic()
                    start = max(now, self.free_at)
                    self.free_at = start + len(chunk) / rate
                time.sleep(max(0.0, self.free_at - now))
            sink.write(chunk)
            length -= len(chunk)


ROUTES = [("info", re.compile(r"^/api/models/(?P<repo>[^/]+/[^/]+)(?:/revision/(?P<rev>[^/]+))?$")),
          ("tree", re.compile(r"^/api/models/(?P<repo>[^/]+/[^/]+)/tree/(?P<rev>[^/]+)(?:/(?P<path>.+))?$")),
          ("paths", re.compile(r"^/api/models/(?P<repo>[^/]+/[^/]+)/paths-info/(?P<rev>[^/]+)$")),
          ("file", re.compile(r"^/(?P<repo>[^/]+/[^/]+)/resolve/(?P<rev>[^/]+)/(?P<path>.+)$"))]
RANGE = re.compile(r"^bytes=(\d+)-(\d*)$")


Log = Callable[[str, str, int, "str | None"], None]


def make_handler(repos: dict[str, Repo], throttle: Throttle, log: Log = lambda *a: None,
                 down: Callable[[], bool] = lambda: False) -> type[BaseHTTPRequestHandler]:
    """A request handler serving REPOS (repo id -> Repo) through THROTTLE; LOG(method, path, status, Authorization)
    records each answer; while DOWN() the connection closes unanswered (the network is cut)."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):  # LOG is the record
            pass

        def handle(self):
            if down():
                log("-", "dropped (offline)", 0, None)
                with contextlib.suppress(OSError):
                    self.connection.close()
                return
            super().handle()

        def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
            self.send_response(status)
            for key, value in {"Content-Type": "application/json", "Content-Length": str(len(body)),
                               **(headers or {})}.items():
                self.send_header(key, value)
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)
            log(self.command, self.path, status, self.headers.get("Authorization"))

        def _error(self, status: int, code: str, message: str, repo: Repo | None = None) -> None:
            # source: huggingface_hub 2.4.0 utils/_http.py hf_raise_for_status reads X-Error-Code and X-Error-Message;
            # file_download.py _get_metadata_or_catch_error reads X-Repo-Commit from an EntryNotFound answer.
            headers = {"X-Error-Code": code, "X-Error-Message": message}
            if repo is not None:
                headers["X-Repo-Commit"] = repo.commit
            self._send(status, json.dumps({"error": message}).encode(), headers)

        def _route(self) -> None:
            url = urllib.parse.urlsplit(self.path)
            path = urllib.parse.unquote(url.path)
            for name, pattern in ROUTES:
                if (match := pattern.match(path)) and (name != "paths") == (self.command != "POST"):
                    return self._answer(name, match, urllib.parse.parse_qs(url.query))
            # not stood in: no other route is asked for a model's download (huggingface_hub's best-effort fetch of
            # /api/agent-harnesses, utils/_detect_agent.py, reads any error as "no registry").
            return self._error(404, "EntryNotFound", f"{path}: not a route of this stand-in")

        def _answer(self, name: str, match: re.Match, query: dict) -> None:
            repo = repos.get(match["repo"])
            if repo is None:
                # source: hf_raise_for_status's RepoNotFound branch: the Hub answers a missing repo, to a caller
                # without a token, with 401 (https://gist.github.com/Wauplin/46c27ad266b15998ce56a6603796f0b9).
                return self._error(401, "RepoNotFound", "Repository not found")
            revision = match["rev"] or "main"
            if not repo.resolves(revision):
                # source: hf_raise_for_status's RevisionNotFound branch (404, X-Error-Code RevisionNotFound).
                return self._error(404, "RevisionNotFound", f"Invalid rev id: {revision}", repo)
            return getattr(self, f"_{name}")(repo, match, query)

        def _info(self, repo: Repo, match: re.Match, query: dict) -> None:
            # source: hf_api.py HfApi.model_info -> ModelInfo(**body): id, sha, siblings[].rfilename.
            return self._send(200, json.dumps(repo.info()).encode())

        def _tree(self, repo: Repo, match: re.Match, query: dict) -> None:
            entries = repo.tree(match["path"] or "", query.get("recursive", ["False"])[0].lower() == "true")
            if entries is None:
                # source: hf_raise_for_status's EntryNotFound branch (a folder the repo does not have).
                return self._error(404, "EntryNotFound", f"{match['path']} does not exist", repo)
            # source: hf_api.py _iter_repo_tree_pages -> RepoFile(**entry) / RepoFolder(**entry), one page (no Link).
            return self._send(200, json.dumps(entries).encode())

        def _paths(self, repo: Repo, match: re.Match, query: dict) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            form = urllib.parse.parse_qs(self.rfile.read(length).decode())
            entries = [entry for path in form.get("paths", []) if (entry := repo.entry(path)) is not None]
            # source: hf_api.py get_paths_info posts the form {paths, expand} and reads RepoFile/RepoFolder entries;
            # a path the repo does not have is left out of the list.
            return self._send(200, json.dumps(entries).encode())

        def _file(self, repo: Repo, match: re.Match, query: dict) -> None:
            entry = repo.files.get(match["path"])
            if entry is None:
                # source: hf_raise_for_status's EntryNotFound branch; X-Repo-Commit for hf_hub_download's .no_exist.
                return self._error(404, "EntryNotFound", f"{match['path']} does not exist", repo)
            self._serve_file(repo, entry)

        def _serve_file(self, repo: Repo, entry: dict) -> None:
            size = entry["size"]
            lfs = entry.get("lfs")
            # source: file_download.py get_hf_file_metadata: X-Repo-Commit, X-Linked-Etag (an LFS file's sha256)
            # or ETag, X-Linked-Size or Content-Length. A GET's Range (one range: http_get's resume asks `bytes=N-`,
            # hf_api.py parse_safetensors_file_metadata `bytes=0-100000`) gets 206 and Content-Range (RFC 9110 14.4).
            headers = {"X-Repo-Commit": repo.commit, "ETag": f'"{entry["oid"]}"', "Accept-Ranges": "bytes",
                       "Content-Type": "application/octet-stream"}
            if lfs:
                headers.update({"X-Linked-Etag": f'"{lfs["oid"]}"', "X-Linked-Size": str(size)})
            asked = RANGE.match(self.headers.get("Range") or "") if self.command == "GET" else None
            start, end = (int(asked[1]), min(int(asked[2] or size - 1), size - 1)) if asked else (0, size - 1)
            partial = asked is not None and start <= end
            if partial:
                headers["Content-Range"] = f"bytes {start}-{end}/{size}"
            else:
                start, end = 0, size - 1
            self.send_response(206 if partial else 200)
            for key, value in {**headers, "Content-Length": str(end + 1 - start)}.items():
                self.send_header(key, value)
            self.end_headers()
            if self.command == "GET":
                with (repo.folder / entry["path"]).open("rb") as f:
                    f.seek(start)
                    throttle.copy(f, self.wfile, end + 1 - start)
            log(self.command, self.path, 206 if partial else 200, self.headers.get("Authorization"))

        do_GET = do_HEAD = do_POST = _route

    return Handler


class HubServer:
    """The stand-in on loopback, for a test on this machine: `with HubServer(repos) as hub:` and hub.url."""

    def __init__(self, repos: dict[str, Repo], rate: float = 0):
        self.requests: list[str] = []
        self.authorizations: list[str | None] = []

        def log(method: str, path: str, status: int, authorization: str | None) -> None:
            self.requests.append(f"{method} {path} {status}")
            self.authorizations.append(authorization)

        handler = make_handler(repos, Throttle(lambda: rate), log)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def __enter__(self) -> HubServer:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()
