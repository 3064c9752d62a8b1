"""The Compute Engine API on loopback, for the three reads `preflight --all-regions` makes: the
project's regions (regions.list), the project (projects.get) and the accelerator types of every
zone (acceleratorTypes.aggregatedList, filtered by name as the API filters). It answers with the
responses recorded under tests/fixtures/gce/ in the API's own JSON, so the real
google-cloud-compute client (REST transport) parses them: pass ``client_kwargs()`` to a client.
"""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import parse_qs, urlparse

from conftest import send_json

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "gce"
FILTER = re.compile(r'name\s*=\s*"?(?P<name>[\w-]+)"?')


DISK = re.compile(r"^/compute/v1/projects/(?P<project>[^/]+)/zones/(?P<zone>[^/]+)/(?P<kind>disks|operations)/"
                  r"(?P<name>[^/?]+)$")


class _Handler(BaseHTTPRequestHandler):
    project: ClassVar[str] = ""
    requests: ClassVar[list[str]] = []
    # The disks `gemma4-t4 up` and `down` read and delete: tests/pulumi_standin.py's world file, when given.
    world: ClassVar[Path | None] = None

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        url = urlparse(self.path)
        self.requests.append(self.path)
        base = f"/compute/v1/projects/{self.project}"
        if url.path == f"{base}/regions":
            # source: the recorded body (tests/fixtures/SOURCES.md).
            self._json(json.loads((FIXTURES / "regions.json").read_text()))
        elif url.path == base:
            # source: the recorded body (tests/fixtures/SOURCES.md).
            self._json(json.loads((FIXTURES / "project.json").read_text()))
        elif url.path == f"{base}/aggregated/acceleratorTypes":
            # source: the recorded body, filtered as the API filters (see _accelerators).
            self._json(self._accelerators(parse_qs(url.query).get("filter", [""])[0]))
        elif (disk := DISK.match(url.path)) is not None and self._world_disk(disk) is not None:
            # source: the disk as tests/pulumi_standin.py made it (REST Resource: disks, cited there).
            self._json(self._world_disk(disk) or {})
        elif url.path.startswith("/compute/v1/projects/"):
            resource = url.path.removeprefix("/compute/v1/")
            message = f"The resource '{resource}' was not found"
            # source: Compute Engine's 404 body (API reference, "Errors": error.code/message/errors[].reason
            # notFound); the message as gcloud prints it in a published transcript (tf-encrypted/tf-encrypted#139:
            # "The resource 'projects/P/zones/Z/disks/N' was not found").
            self._json({"error": {"code": 404, "message": message,
                                  "errors": [{"message": message, "domain": "global", "reason": "notFound"}]}}, 404)
        else:
            # not stood in: a path outside the Compute API; the client raises on the 400.
            self._json({"error": {"code": 400, "message": "bad path"}}, 400)

    def _world_disk(self, found: re.Match) -> dict[str, Any] | None:
        if self.world is None or found["kind"] != "disks" or not self.world.is_file():
            return None
        return json.loads(self.world.read_text())["disks"].get(f"{found['zone']}/{found['name']}")

    def do_DELETE(self) -> None:
        url = urlparse(self.path)
        self.requests.append(f"DELETE {self.path}")
        found = DISK.match(url.path)
        if found is None or self.world is None or self._world_disk(found) is None:
            # not stood in: deleting anything but a disk of the world (or one that is not there).
            self._json({"error": {"code": 404, "message": f"The resource '{url.path}' was not found"}}, 404)
            return
        world = json.loads(self.world.read_text())
        world["disks"].pop(f"{found['zone']}/{found['name']}")
        self.world.write_text(json.dumps(world))
        base = f"https://www.googleapis.com/compute/v1/projects/{found['project']}/zones/{found['zone']}"
        # source: Compute Engine v1 REST Resource: zoneOperations (compute#operation: name, operationType delete,
        # targetLink, status DONE, progress 100), as disks.delete answers once done.
        self._json({"kind": "compute#operation", "id": "1", "name": f"operation-delete-{found['name']}",
                    "zone": base, "operationType": "delete", "targetLink": f"{base}/disks/{found['name']}",
                    "status": "DONE", "progress": 100, "selfLink": f"{base}/operations/operation-delete"})

    def _accelerators(self, query: str) -> dict[str, Any]:
        doc = json.loads((FIXTURES / "accelerator-types.json").read_text())
        wanted = FILTER.fullmatch(query.strip())
        if wanted is None:
            return doc
        for scope, scoped in doc["items"].items():
            kept = [a for a in scoped.get("acceleratorTypes", []) if a["name"] == wanted["name"]]
            # source: Compute API reference, acceleratorTypes.aggregatedList: a scope without results carries
            # warning.code NO_RESULTS_ON_PAGE.
            doc["items"][scope] = {"acceleratorTypes": kept} if kept else {"warning": {
                "code": "NO_RESULTS_ON_PAGE", "message": f"There are no results for scope '{scope}' on this page."}}
        return doc

    def _json(self, doc: dict[str, Any], status: int = 200) -> None:
        send_json(self, status, doc)


class ComputeStandIn:
    def __init__(self, project: str = "gemma-proj", world: Path | None = None):
        handler = type("Handler", (_Handler,), {"project": project, "requests": [], "world": world})
        self.requests: list[str] = handler.requests
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> ComputeStandIn:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()

    @property
    def endpoint(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def client_kwargs(self) -> dict[str, Any]:
        from google.api_core.client_options import ClientOptions
        from google.auth.credentials import AnonymousCredentials

        host, port = self.server.server_address[:2]
        return {"credentials": AnonymousCredentials(),
                "client_options": ClientOptions(api_endpoint=f"http://{host}:{port}")}
