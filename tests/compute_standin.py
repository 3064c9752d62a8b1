"""A local stand-in for the Compute Engine v1 REST API (tests only): one server on loopback, one handler routing
by path, answering in the API's own JSON so the real google-cloud-compute client (REST transport: its request
building, JSON parsing, error mapping 404 -> NotFound, operation messages) and gemma4_t4's own calls run for real.
Point a client at it with ``client_kwargs()`` (client_options.api_endpoint), or the CLI with
``--compute-endpoint URL``. It serves from the moment it is made; ``close()`` (or leaving ``with``) stops it.

What it answers:

- One project's VMs, replaying the recorded responses in fixtures/compute_engine.json: instances.get, start and
  stop (a RUNNING operation that is DONE on the second poll, the VM passing through STOPPING or STAGING meanwhile,
  as on GCE), zoneOperations.get, disks.get, and a start that finds no T4 free (``stockout``).
- instances.getGuestAttributes as the API reference gives it
  (https://cloud.google.com/compute/docs/reference/rest/v1/instances/getGuestAttributes): a
  compute#guestAttributes with queryPath and queryValue.items [{namespace, key, value}] for the keys under the
  queried namespace, its selfLink the instance's guestAttributes/ (gcloud's own ssh tests record that form,
  googlecloudsdk tests GUEST_ATTRIBUTES_CONTENTS); and 404 while the guest has written nothing there (clients keep
  polling on it: compute-image-tools' WaitForGuestAttributes). Only the status of that 404 is relied on; its body
  is the recorded not-found body of the instance.
- The three reads `preflight --all-regions` makes, from the bodies recorded under fixtures/gce/: the project's
  regions (regions.list), the project (projects.get) and the accelerator types of every zone
  (acceleratorTypes.aggregatedList, filtered by name as the API filters).
- With a ``world`` file (tests/pulumi_standin.py's world.json, the stand-in `pulumi`'s cloud): the disks
  `gemma4-t4 up` and `down` read and delete come from it instead of the recorded ones.

Every request is logged in ``requests`` ("METHOD /path?query"); ``calls`` is the same log's instance, disk and
operation requests as (method, "kind/name[/verb]").
"""

from __future__ import annotations

import copy
import itertools
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

from conftest import send_json

FIXTURES = Path(__file__).resolve().parent / "fixtures"
RECORDED = json.loads((FIXTURES / "compute_engine.json").read_text())
ROUTE = re.compile(r"^/compute/v1/projects/(?P<project>[^/]+)/zones/(?P<zone>[^/]+)/"
                   r"(?P<kind>instances|disks|operations)/(?P<name>[^/?]+)(?:/(?P<verb>start|stop|getGuestAttributes))?$")
FILTER = re.compile(r'name\s*=\s*"?(?P<name>[\w-]+)"?')
RECORDED_RESOURCE = "projects/PROJECT/zones/us-west2-b/instances/NAME"  # the resource in the recorded 404
POLLS_UNTIL_DONE = 2

Answer = tuple[int, dict[str, Any]]


def _recorded(key: str, project: str) -> dict:
    return json.loads(json.dumps(RECORDED[key]).replace("PROJECT", project))


def _call(method: str, path: str) -> tuple[str, str] | None:
    found = ROUTE.match(urlparse(path).path)
    if found is None:
        return None
    return method, f"{found['kind']}/{found['name']}" + (f"/{found['verb']}" if found["verb"] else "")


class ComputeStandIn:
    def __init__(self, project: str = "my-project", world: Path | None = None):
        self.project = project
        self.world = world
        self.instances: dict[str, dict] = {}
        self.operations: dict[str, dict] = {}
        self.requests: list[str] = []
        self.stockout = False  # a start fails as when the zone has no T4 free
        # Kinds the caller may not read ("disks", "operations"): an operator with the stack's role on the VM alone.
        self.forbidden: set[str] = set()
        self.guest: dict[str, dict[str, str]] = {}  # instance -> {"NAMESPACE/KEY": value}, as the guest PUT them
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        standin = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _route(self, method: str) -> None:
                if method in ("POST", "DELETE"):
                    self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with standin._lock:
                    status, doc = standin.route(method, self.path)
                send_json(self, status, doc)

            def do_GET(self) -> None:
                self._route("GET")

            def do_POST(self) -> None:
                self._route("POST")

            def do_DELETE(self) -> None:
                self._route("DELETE")

        return Handler

    def __enter__(self) -> ComputeStandIn:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def client_kwargs(self) -> dict[str, Any]:
        """A google-cloud-compute client's keyword arguments that send it here."""
        from google.api_core.client_options import ClientOptions
        from google.auth.credentials import AnonymousCredentials

        return {"credentials": AnonymousCredentials(), "client_options": ClientOptions(api_endpoint=self.url)}

    @property
    def calls(self) -> list[tuple[str, str]]:
        """The instance, disk and operation requests, as (method, "kind/name[/verb]")."""
        return [call for request in list(self.requests) if (call := _call(*request.split(" ", 1))) is not None]

    # --- the test's side: what exists --------------------------------------------------------------------------

    def add_vm(self, status: str = "RUNNING", labels: dict[str, str] | None = None) -> dict:
        """The stack's VM, as recorded, in the given state; returns {project, zone, instance}. Its labels are the
        component's (components/gce/storage.py APP_LABEL: app=gemma4-t4 on every resource), in the instances resource's
        `labels` map (Compute API reference, instances: "labels": {string: string}); the recorded VM had none."""
        instance = _recorded("instance", self.project)
        instance["status"] = status
        instance["labels"] = {"app": "gemma4-t4"} if labels is None else labels
        self.instances[instance["name"]] = instance
        return {"project": self.project, "zone": "us-west2-b", "instance": instance["name"]}

    def set_guest(self, name: str, namespace: str = "gemma4-t4", **keys: str) -> None:
        """What the guest PUT to its metadata server's guest-attributes/NAMESPACE/KEY (thread-safe)."""
        with self._lock:
            attributes = self.guest.setdefault(name, {})
            attributes.update({f"{namespace}/{key}": value for key, value in keys.items()})

    def status(self, name: str) -> str:
        return self.instances[name]["status"]

    # --- the API's side: routing by path -----------------------------------------------------------------------

    def route(self, method: str, path: str) -> Answer:
        self.requests.append(f"{method} {path}")
        url = urlparse(path)
        base = f"/compute/v1/projects/{self.project}"
        if method == "GET" and url.path == f"{base}/regions":
            # source: the recorded body (tests/fixtures/SOURCES.md: gce/regions.json).
            return 200, json.loads((FIXTURES / "gce" / "regions.json").read_text())
        if method == "GET" and url.path == base:
            # source: the recorded body (tests/fixtures/SOURCES.md: gce/project.json).
            return 200, json.loads((FIXTURES / "gce" / "project.json").read_text())
        if method == "GET" and url.path == f"{base}/aggregated/acceleratorTypes":
            # source: the recorded body, filtered as the API filters (see _accelerators).
            return 200, self._accelerators(parse_qs(url.query).get("filter", [""])[0])
        if (found := ROUTE.match(url.path)) is not None and (method != "DELETE" or found["kind"] == "disks"):
            return self._resource(method, url.query, **found.groupdict())
        if url.path.startswith("/compute/v1/projects/"):
            # source: Compute Engine's 404 for a resource it does not have (see _not_found).
            return self._not_found(url.path.removeprefix("/compute/v1/"))
        # not stood in: a path outside the Compute API; the client raises on the 400.
        return 400, {"error": {"code": 400, "message": "bad path"}}

    def _resource(self, method: str, query: str, project: str, zone: str, kind: str, name: str,
                  verb: str | None) -> Answer:
        resource = f"projects/{project}/zones/{zone}/{kind}/{name}"
        if project != self.project:
            return self._not_found(resource)
        if kind in self.forbidden:
            if kind == "operations" and name in self.operations:
                self._poll(name)  # GCE carries the operation on whether or not the caller may read it
            return self._forbidden(zone, kind, name)
        if kind == "instances" and verb is None and "operations" in self.forbidden:
            for operation, entry in self.operations.items():  # time passes for operations nobody may poll
                if entry["instance"] == name and entry["doc"]["status"] != "DONE":
                    self._poll(operation)
        if kind == "disks":
            return self._disk(method, zone, name)
        if kind == "operations":
            return self._poll(name) if name in self.operations else self._not_found(resource)
        instance = self.instances.get(name)
        if instance is None:
            return self._not_found(resource)
        if verb is None:
            # source: the recorded instance (compute_engine.json), in the state the test put it in.
            return 200, copy.deepcopy(instance)
        if verb == "getGuestAttributes":
            return self._guest_attributes(name, query)
        return 200, self._begin(instance, verb)

    def _not_found(self, resource: str) -> Answer:
        # source: the recorded not-found body (compute_engine.json: Compute Engine's error body, error.code/message/
        # errors[].reason notFound), its resource the one asked for; the message as gcloud prints it in a published
        # transcript (tf-encrypted/tf-encrypted#139: "The resource 'projects/P/zones/Z/disks/N' was not found").
        return 404, json.loads(json.dumps(RECORDED["not_found"]).replace(RECORDED_RESOURCE, resource))

    def _forbidden(self, zone: str, kind: str, name: str) -> Answer:
        # source: the Compute API's 403 as a published transcript gives it (hashicorp/packer#12159: "googleapi:
        # Error 403: Required 'compute.zones.get' permission for 'projects/...', forbidden", the Go client's
        # rendering of this JSON error's message and reason; components/gce/provider_answers.py disk_forbidden).
        permission = {"disks": "compute.disks.get", "operations": "compute.zoneOperations.get"}[kind]
        message = f"Required '{permission}' permission for 'projects/{self.project}/zones/{zone}/{kind}/{name}'"
        return 403, {"error": {"code": 403, "message": message,
                               "errors": [{"message": message, "domain": "global", "reason": "forbidden"}]}}

    def _guest_attributes(self, name: str, query: str | None) -> Answer:
        instance = self.instances[name]
        path = parse_qs(query or "").get("queryPath", [""])[0]
        items = [{"namespace": key.split("/", 1)[0], "key": key.split("/", 1)[1], "value": value}
                 for key, value in sorted(self.guest.get(name, {}).items()) if key.startswith(path)]
        if not items:
            zone = instance["zone"].rsplit("/", 1)[-1]
            return self._not_found(f"projects/{self.project}/zones/{zone}/instances/{name}")
        # source: instances.getGuestAttributes in the API reference (the module's docstring).
        return 200, {"kind": "compute#guestAttributes", "queryPath": path, "queryValue": {"items": items},
                     "selfLink": f"{instance['selfLink']}/guestAttributes/{path}"}

    def _accelerators(self, query: str) -> dict[str, Any]:
        doc = json.loads((FIXTURES / "gce" / "accelerator-types.json").read_text())
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

    # --- disks: the recorded ones, or the world file's -----------------------------------------------------------

    def _disk(self, method: str, zone: str, name: str) -> Answer:
        resource = f"projects/{self.project}/zones/{zone}/disks/{name}"
        if self.world is None:
            if method == "DELETE" or name not in RECORDED["disks"]:
                # not stood in: deleting a recorded disk (the tools delete only the world's); else not found.
                return self._not_found(resource)
            # source: the recorded disk (compute_engine.json).
            return 200, _recorded("disks", self.project)[name]
        world = json.loads(self.world.read_text()) if self.world.is_file() else {"disks": {}}
        disk = world["disks"].get(f"{zone}/{name}")
        if disk is None:
            return self._not_found(resource)
        if method == "GET":
            # source: the disk as tests/pulumi_standin.py made it (REST Resource: disks, cited there).
            return 200, disk
        world["disks"].pop(f"{zone}/{name}")
        self.world.write_text(json.dumps(world))
        base = f"https://www.googleapis.com/compute/v1/projects/{self.project}/zones/{zone}"
        # source: Compute Engine v1 REST Resource: zoneOperations (compute#operation: name, operationType delete,
        # targetLink, status DONE, progress 100), as disks.delete answers once done.
        return 200, {"kind": "compute#operation", "id": "1", "name": f"operation-delete-{name}", "zone": base,
                     "operationType": "delete", "targetLink": f"{base}/disks/{name}", "status": "DONE",
                     "progress": 100, "selfLink": f"{base}/operations/operation-delete"}

    # --- stop and start: operations ------------------------------------------------------------------------------

    def _begin(self, instance: dict, verb: str) -> dict:
        # source: the recorded operation (compute_engine.json), named and aimed at this VM.
        operation = _recorded("operation", self.project)
        operation["name"] = f"operation-{next(self._ids)}-{verb}"
        operation["selfLink"] = operation["selfLink"].rsplit("/", 1)[0] + "/" + operation["name"]
        operation["operationType"] = verb
        operation["targetLink"] = instance["selfLink"]
        failing = verb == "start" and self.stockout
        instance["status"] = {"stop": "STOPPING", "start": "STAGING"}[verb] if not failing else instance["status"]
        self.operations[operation["name"]] = {"doc": operation, "polls": 0, "instance": instance["name"],
                                              "verb": verb, "failing": failing}
        return copy.deepcopy(operation)

    def _poll(self, name: str) -> Answer:
        entry = self.operations[name]
        entry["polls"] += 1
        doc = entry["doc"]
        if entry["polls"] >= POLLS_UNTIL_DONE and doc["status"] != "DONE":
            doc.update(status="DONE", progress=100, endTime="2026-09-21T09:05:43.881-07:00")
            if entry["failing"]:
                # source: the recorded stockout (compute_engine.json: ZONE_RESOURCE_POOL_EXHAUSTED, its _about).
                doc.update(_recorded("stockout", self.project))
            else:
                self.instances[entry["instance"]]["status"] = {"stop": "TERMINATED", "start": "RUNNING"}[entry["verb"]]
        return 200, copy.deepcopy(doc)
