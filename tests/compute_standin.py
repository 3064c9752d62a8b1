"""A local stand-in for the Compute Engine v1 REST API (tests only), replaying the recorded
responses in fixtures/compute_engine.json for one project's VMs.

google-cloud-compute is pointed at it with client_options.api_endpoint, so the client's own
request building, JSON parsing, error mapping (404 -> NotFound) and operation messages run for
real. A stop or start returns a RUNNING operation that is DONE on the second poll, and the VM
passes through STOPPING or STAGING meanwhile, as on GCE.

instances.getGuestAttributes answers as the API reference gives it
(https://cloud.google.com/compute/docs/reference/rest/v1/instances/getGuestAttributes): a
compute#guestAttributes with queryPath and queryValue.items [{namespace, key, value}] for the keys
under the queried namespace, its selfLink the instance's guestAttributes/ (gcloud's own ssh tests
record that form, googlecloudsdk tests GUEST_ATTRIBUTES_CONTENTS); and 404 while the guest has
written nothing there (clients keep polling on it: compute-image-tools' WaitForGuestAttributes). Only
the status of that 404 is relied on; its body is the recorded not-found body of the instance.
"""

from __future__ import annotations

import copy
import itertools
import json
import re
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from conftest import send_json

RECORDED = json.loads((Path(__file__).parent / "fixtures" / "compute_engine.json").read_text())
BASE = "https://www.googleapis.com/compute/v1"
ROUTE = re.compile(r"^/compute/v1/projects/(?P<project>[^/]+)/zones/(?P<zone>[^/]+)/"
                   r"(?P<kind>instances|disks|operations)/(?P<name>[^/?]+)(?:/(?P<verb>start|stop|getGuestAttributes))?"
                   r"(?:\?(?P<query>.*))?$")
POLLS_UNTIL_DONE = 2


def _recorded(key: str, project: str) -> dict:
    return json.loads(json.dumps(RECORDED[key]).replace("PROJECT", project))


class ComputeStandIn:
    def __init__(self, project: str = "my-project"):
        self.project = project
        self.instances: dict[str, dict] = {}
        self.operations: dict[str, dict] = {}
        self.calls: list[tuple[str, str]] = []  # (method, "kind/name[/verb]")
        self.stockout = False  # a start fails as when the zone has no T4 free
        # Kinds the caller may not read ("disks", "operations"): an operator with the stack's role on the VM alone.
        self.forbidden: set[str] = set()
        self.guest: dict[str, dict[str, str]] = {}  # instance -> {"NAMESPACE/KEY": value}, as the guest PUT them
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        standin = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _reply(self, status: int, doc: dict) -> None:
                send_json(self, status, doc)

            def _route(self, method: str) -> None:
                if method == "POST":
                    self.rfile.read(int(self.headers.get("Content-Length", 0)))
                match = ROUTE.match(self.path)
                if match is None:
                    # not stood in: a route the tools never call; the client raises on the 404.
                    return self._reply(404, {"error": {"code": 404, "message": f"no route {self.path}"}})
                with standin._lock:
                    status, doc = standin.handle(method, **match.groupdict())
                self._reply(status, doc)

            def do_GET(self):
                self._route("GET")

            def do_POST(self):
                self._route("POST")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

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

    def _guest_attributes(self, name: str, query: str | None) -> tuple[int, dict]:
        instance = self.instances[name]
        path = urllib.parse.parse_qs(query or "").get("queryPath", [""])[0]
        items = [{"namespace": key.split("/", 1)[0], "key": key.split("/", 1)[1], "value": value}
                 for key, value in sorted(self.guest.get(name, {}).items()) if key.startswith(path)]
        if not items:
            return self._not_found(instance["zone"].rsplit("/", 1)[-1], "instances", name)
        return 200, {"kind": "compute#guestAttributes", "queryPath": path, "queryValue": {"items": items},
                     "selfLink": f"{instance['selfLink']}/guestAttributes/{path}"}

    def status(self, name: str) -> str:
        return self.instances[name]["status"]

    def _not_found(self, zone: str, kind: str, name: str) -> tuple[int, dict]:
        doc = json.dumps(RECORDED["not_found"]).replace("PROJECT", self.project).replace("NAME", name)
        return 404, json.loads(doc.replace("/instances/", f"/{kind}/").replace("us-west2-b", zone))

    def _forbidden(self, zone: str, kind: str, name: str) -> tuple[int, dict]:
        # source: the Compute API's 403 as a published transcript gives it (hashicorp/packer#12159: "googleapi:
        # Error 403: Required 'compute.zones.get' permission for 'projects/...', forbidden", the Go client's
        # rendering of this JSON error's message and reason; components/gce/provider_answers.py disk_forbidden).
        permission = {"disks": "compute.disks.get", "operations": "compute.zoneOperations.get"}[kind]
        message = f"Required '{permission}' permission for 'projects/{self.project}/zones/{zone}/{kind}/{name}'"
        return 403, {"error": {"code": 403, "message": message,
                               "errors": [{"message": message, "domain": "global", "reason": "forbidden"}]}}

    def handle(self, method: str, project: str, zone: str, kind: str, name: str, verb: str | None,
               query: str | None = None):
        self.calls.append((method, f"{kind}/{name}" + (f"/{verb}" if verb else "")))
        if project != self.project:
            return self._not_found(zone, kind, name)
        if kind in self.forbidden:
            if kind == "operations":
                self._poll(name)  # GCE carries the operation on whether or not the caller may read it
            return self._forbidden(zone, kind, name)
        if kind == "instances" and verb is None and "operations" in self.forbidden:
            for operation, entry in self.operations.items():  # time passes for operations nobody may poll
                if entry["instance"] == name and entry["doc"]["status"] != "DONE":
                    self._poll(operation)
        if kind == "disks":
            disks = RECORDED["disks"]
            return (200, _recorded("disks", project)[name]) if name in disks else self._not_found(zone, kind, name)
        if kind == "operations":
            return self._poll(name)
        instance = self.instances.get(name)
        if instance is None:
            return self._not_found(zone, kind, name)
        if verb is None:
            return 200, copy.deepcopy(instance)
        if verb == "getGuestAttributes":
            return self._guest_attributes(name, query)
        return 200, self._begin(instance, verb)

    def _begin(self, instance: dict, verb: str) -> dict:
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

    def _poll(self, name: str) -> tuple[int, dict]:
        entry = self.operations[name]
        entry["polls"] += 1
        doc = entry["doc"]
        if entry["polls"] >= POLLS_UNTIL_DONE and doc["status"] != "DONE":
            doc.update(status="DONE", progress=100, endTime="2026-09-21T09:05:43.881-07:00")
            if entry["failing"]:
                doc.update(_recorded("stockout", self.project))
            else:
                self.instances[entry["instance"]]["status"] = {"stop": "TERMINATED", "start": "RUNNING"}[entry["verb"]]
        return 200, copy.deepcopy(doc)

    def close(self) -> None:
        self.server.shutdown()
