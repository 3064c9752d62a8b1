#!/usr/bin/env python3
"""A stand-in for the `pulumi` CLI as Pulumi's Automation API (Python SDK 3.272.0) drives it, first on PATH in the
tests of `gemma4-t4 up` and `down`. It answers only what the SDK asks, as the CLI answers (py = pulumi/pulumi
sdk/python/lib/pulumi/automation as in PyPI pulumi 3.272.0, go = the CLI's sources at v3.259.0):

- `version` (py _cmd.py PulumiCommand.__init__, no --non-interactive): v3.259.0, newer than 3.205.0, so the SDK
  serves the engine events over gRPC (py _stack.py _setup_event_log: `ver > VersionInfo(3, 205, 0)`) and passes
  `--event-log tcp://127.0.0.1:PORT`; the stand-in then streams each event as the CLI does
  (go display.go startEventLogger: pulumirpc.Events/StreamEvents, EventRequest{event: JSON}).
- `stack select --stack S` / `stack init S` (py LocalWorkspace.select_stack/create_stack): "no stack named 'S'
  found" (go backenderr.go) on stderr, exit 6 for a stack not found (go exit_codes.go ExitCodeFor, CLI >= 3.227.0).
- `config set KEY --plaintext --stack S --non-interactive -- VALUE` (py Stack.set_config): the key written into
  Pulumi.S.yaml's config: in the work dir, as `pulumi config set` does.
- `up --yes --skip-preview --exec-kind auto.local --event-log L --stack S`, `destroy --skip-preview --yes ...`,
  then `stack history --json ...` (py Stack.up/destroy) and `stack output --json [--show-secrets]` (py
  LocalWorkspace.stack_outputs).
- `cancel --yes --stack S` (py Stack.cancel): the lock removed (go diy/backend.go CancelCurrentUpdate).
- Events: preludeEvent, resourcePreEvent/resOutputsEvent with StepEventMetadata, diagnosticEvent (severity error,
  the resource's urn) then resOpFailedEvent for a failed step, the engine's "update failed"/"update canceled"
  error, summaryEvent, and cancelEvent last (go apitype/events.go; py events.py from_json).
- A failed update exits 1, a cancelled one 8 (go exit_codes.go); the provider's text is in the "Diagnostics:"
  section on stdout (go display/progress.go printDiagnostics).
- SIGINT: the first prints "^C received; cancelling. ..." as a stdoutEvent, lets the running step finish, saves
  the state and exits "update canceled" (go cancellation_scope.go NewScope; deployment_executor.go Execute).

The cloud is a JSON file (PULUMI_STANDIN_DIR/world.json: disks and instances, which tests/compute_standin.py serves as
the Compute API), the backend another (state.json), what the test wants the cloud to refuse a third
(scenario.json: {"stockout": [zones], "quota": [regions], "global_quota": bool, "hang": bool}); argv is logged.
GCE's refusals are the provider's texts (gemma4_t4/clouds/gce/failover.py cites them).
"""

from __future__ import annotations

import json
import os
import queue
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

import yaml

HOME = Path(os.environ["PULUMI_STANDIN_DIR"])
STATE, WORLD, SCENARIO = HOME / "state.json", HOME / "world.json", HOME / "scenario.json"
PROJECT = "gemma4-t4"
COMPONENT = "gemma4-t4:index:GceT4Server"
INSTANCE, DISK = "gcp:compute/instance:Instance", "gcp:compute/disk:Disk"
ENDPOINT = "aws:sagemaker/endpoint:Endpoint"
CANCELLED = threading.Event()


def _load(path: Path, default: Any) -> Any:
    return json.loads(path.read_text()) if path.is_file() else default


def _save(path: Path, doc: Any) -> None:
    path.write_text(json.dumps(doc, indent=1, sort_keys=True))


class Events:
    """The CLI's side of the gRPC event stream (go display.go startEventLogger)."""

    def __init__(self, address: str | None):
        self.sequence = 0
        self.queue: queue.Queue = queue.Queue()
        self.thread = None
        if address and address.startswith("tcp://"):
            import grpc
            from pulumi.runtime.proto import events_pb2, events_pb2_grpc

            stub = events_pb2_grpc.EventsStub(grpc.insecure_channel(address.removeprefix("tcp://")))

            def requests():
                while (item := self.queue.get()) is not None:
                    yield events_pb2.EventRequest(event=item)

            self.thread = threading.Thread(target=stub.StreamEvents, args=(requests(),), daemon=True)
            self.thread.start()

    def send(self, **payload: Any) -> None:
        self.sequence += 1
        # source: go sdk/go/common/apitype/events.go EngineEvent: sequence, timestamp, one payload key.
        self.queue.put(json.dumps({"sequence": self.sequence, "timestamp": int(time.time()), **payload}))

    def close(self) -> None:
        # source: py events.py CancelEvent ("the last event of every operation").
        self.send(cancelEvent={})
        self.queue.put(None)
        if self.thread is not None:
            self.thread.join(10)


def _urn(stack: str, type_: str, name: str) -> str:
    parent = f"pulumi:pulumi:Stack${COMPONENT}$" if type_ != COMPONENT else "pulumi:pulumi:Stack$"
    return f"urn:pulumi:{stack}::{PROJECT}::{parent}{type_}::{name}"


def _meta(op: str, urn: str, type_: str, outputs: dict[str, Any] | None = None) -> dict[str, Any]:
    # source: go apitype/events.go StepEventMetadata and StepEventStateMetadata (py events.py from_json).
    state = None if outputs is None else {"type": type_, "urn": urn, "custom": True, "inputs": {},
                                          "outputs": outputs}
    return {"op": op, "urn": urn, "type": type_, "provider": "", "new": state}


def _config(stack: str) -> dict[str, Any]:
    project = yaml.safe_load(Path("Pulumi.yaml").read_text()).get("config") or {}
    config = {f"{PROJECT}:{k}": v["default"] for k, v in project.items() if isinstance(v, dict) and "default" in v}
    path = Path(f"Pulumi.{stack}.yaml")
    stack_doc = (yaml.safe_load(path.read_text()) or {}) if path.is_file() else {}
    config.update(stack_doc.get("config") or {})
    return config


def _refusal(config: dict[str, Any], zone: str, scenario: dict[str, Any]) -> str | None:
    project, region = config.get("gcp:project", "PROJECT"), zone.rsplit("-", 1)[0]
    if zone in scenario.get("stockout", []):
        # source: GCE ZONE_RESOURCE_POOL_EXHAUSTED as terraform-provider-google prints it ("Error waiting for
        # instance to create: " + message; hashicorp/terraform-provider-google#1052).
        return (f"Error waiting for instance to create: The zone 'projects/{project}/zones/{zone}' does not have "
                "enough resources available to fulfill the request.  Try a different zone, or try again later.")
    if region in scenario.get("quota", []):
        # source: QUOTA_EXCEEDED's message (GoogleCloudPlatform/ml-on-gcp dlvm/nvidia/README.md) after the
        # provider's prefix, with the metric lines ComputeOperationError adds (compute_operation.go).
        return (f"Error waiting for instance to create: Quota 'NVIDIA_T4_GPUS' exceeded.  Limit: 0.0 in region "
                f"{region}.\n\tmetric name = compute.googleapis.com/nvidia_t4_gpus\n\tlimit name = "
                "NVIDIA-T4-GPUS-per-project-region\n\tdimensions = map[region:" + region + "]")
    if scenario.get("live_migration"):
        # source: a GPU VM without scheduling.onHostMaintenance TERMINATE, via Terraform (iterative/cml#1398),
        # wrapped as resourceComputeInstanceCreate wraps the insert call's rejection (terraform-provider-google).
        return ("Error creating instance: googleapi: Error 400: Instances with guest accelerators do not support "
                "live migration., badRequest")
    if scenario.get("global_quota"):
        # source: fastai/course-v3#165 (gcloud), after the provider's prefix.
        return "Error waiting for instance to create: Quota 'GPUS_ALL_REGIONS' exceeded. Limit: 0.0 globally."
    return None


def _step(events: Events, state: dict[str, Any], op: str, urn: str, type_: str, outputs: dict[str, Any]) -> None:
    events.send(resourcePreEvent={"metadata": _meta(op, urn, type_, outputs)})
    print(f"    {'+' if op == 'create' else ' '}  {type_} {urn.rsplit('::', 1)[-1]} {op}")
    state["resources"][urn] = {"type": type_, "outputs": outputs}
    events.send(resOutputsEvent={"metadata": _meta(op, urn, type_, outputs)})


def _disk_doc(project: str, zone: str, name: str, size: int) -> dict[str, Any]:
    # source: Compute Engine v1 REST Resource: disks (name, sizeGb as a string, zone and type as URLs, status,
    # creationTimestamp; users and lastAttachTimestamp only once a VM attached it).
    base = f"https://www.googleapis.com/compute/v1/projects/{project}/zones/{zone}"
    return {"kind": "compute#disk", "id": str(abs(hash(name)) % 10**18), "name": name, "sizeGb": str(size),
            "zone": base, "type": f"{base}/diskTypes/pd-balanced", "status": "READY",
            "creationTimestamp": "2026-12-06T08:00:00.000-08:00", "selfLink": f"{base}/disks/{name}",
            "labels": {"app": "gemma4-t4"}}


def _gce_up(stack: str, config: dict[str, Any], events: Events, state: dict[str, Any]) -> str | None:
    """The GCE component's two resources that matter here: its data disk, then its VM. None: done; else the
    provider's error for the VM."""
    world, scenario = _load(WORLD, {"disks": {}, "instances": {}}), _load(SCENARIO, {})
    zone, project = str(config[f"{PROJECT}:zone"]), str(config.get("gcp:project", "PROJECT"))
    name, vm = f"gemma4-t4-{stack}-data", f"gemma4-t4-{stack}-vm"
    disk_urn, vm_urn = _urn(stack, DISK, f"{stack}-data"), _urn(stack, INSTANCE, f"{stack}-vm")
    _step(events, state, "same" if _urn(stack, COMPONENT, stack) in state["resources"] else "create",
          _urn(stack, COMPONENT, stack), COMPONENT, {})
    held = state["resources"].get(disk_urn)
    if held is not None and held["outputs"]["zone"] == zone:
        op = "same"
    elif f"{zone}/{name}" in world["disks"]:
        op = "import"  # the component adopts a retained disk (components/gce adoptable_disk)
    else:
        op = "create"
        world["disks"][f"{zone}/{name}"] = _disk_doc(project, zone, name, int(config[f"{PROJECT}:dataDiskSizeGb"]))
        _save(WORLD, world)
    _step(events, state, op, disk_urn, DISK, {"name": name, "zone": zone, "project": project})
    _save(STATE, state)
    held = state["resources"].get(vm_urn)
    if held is not None and held["outputs"]["zone"] == zone:
        _step(events, state, "same", vm_urn, INSTANCE, held["outputs"])
        return None
    events.send(resourcePreEvent={"metadata": _meta("create", vm_urn, INSTANCE)})
    if scenario.get("hang"):
        (HOME / "hanging").write_text("1")
        CANCELLED.wait(60)
    if (refused := _refusal(config, zone, scenario)) is not None:
        # source: go display/progress.go and engine: the provider's error as a diagnosticEvent on the resource's urn, then
        # resOpFailedEvent (go apitype/events.go ResOpFailedEvent: status 0 OK... steps).
        events.send(diagnosticEvent={"urn": vm_urn, "prefix": "error: ", "message": refused + "\n",
                                     "color": "never", "severity": "error", "ephemeral": False})
        events.send(resOpFailedEvent={"metadata": _meta("create", vm_urn, INSTANCE), "status": 0, "steps": 0})
        return refused
    outputs = {"name": vm, "zone": zone, "project": project}
    state["resources"][vm_urn] = {"type": INSTANCE, "outputs": outputs}
    events.send(resOutputsEvent={"metadata": _meta("create", vm_urn, INSTANCE, outputs)})
    disk = world["disks"][f"{zone}/{name}"]
    disk.update(lastAttachTimestamp="2026-12-06T08:05:00.000-08:00", users=[f"{disk['zone']}/instances/{vm}"])
    world["instances"][f"{zone}/{vm}"] = {"name": vm, "status": "RUNNING"}
    _save(WORLD, world)
    state["outputs"] = {"cloud": "gce", "port": 8000, "served_model_name": "gemma", "data_disk_name": name,
                        "target": {"instance": vm, "zone": zone, "project": project},
                        "connect_command": f"gcloud compute ssh {vm} --zone {zone}", "cost_per_hour_usd": 0.445,
                        "billing_after_destroy_usd_per_month": 25.0}
    return None


def _sagemaker_up(stack: str, config: dict[str, Any], events: Events, state: dict[str, Any]) -> str | None:
    urn = _urn(stack, ENDPOINT, f"{stack}-endpoint")
    region = str(config.get("aws:region", "us-east-2"))
    name = f"gemma4-t4-{stack}"
    _step(events, state, "same" if urn in state["resources"] else "create", urn, ENDPOINT, {"name": name})
    state["outputs"] = {"cloud": "sagemaker", "port": 8080, "served_model_name": "gemma",
                        "target": {"endpoint_name": name, "region": region}, "connect_command": "aws ...",
                        "cost_per_hour_usd": 0.7364, "billing_after_destroy_usd_per_month": 0.0}
    return None


def _finish(events: Events, state: dict[str, Any], stack: str, verb: str, refused: str | None) -> int:
    state.pop("locked", None)
    _save(STATE, {**_load(STATE, {}), stack: state})
    if refused is None and not CANCELLED.is_set():
        # source: go apitype/events.go SummaryEvent (py events.py SummaryEvent.from_json).
        events.send(summaryEvent={"maybeCorrupt": False, "durationSeconds": 1, "resourceChanges": {},
                                  "PolicyPacks": {}})
        events.close()
        print(f"Resources:\n    {len(state['resources'])} unchanged\n\nDuration: 1s")
        return 0
    said = "update canceled" if CANCELLED.is_set() else "update failed"
    # source: go deployment_executor.go reportExecResult: the engine's own error, no urn.
    events.send(diagnosticEvent={"prefix": "error: ", "message": said + "\n", "color": "never", "severity": "error",
                                 "ephemeral": False})
    events.close()
    print("Diagnostics:")
    if refused:
        print(f"  {INSTANCE} ({stack}-vm):\n    error: {refused}\n")
    print(f"  pulumi:pulumi:Stack ({PROJECT}-{stack}):\n    error: {said}")
    # source: go exit_codes.go ExitCodeFor: 8 cancelled, 1 a failed update.
    return 8 if CANCELLED.is_set() else 1


def up(stack: str, event_log: str | None) -> int:
    states = _load(STATE, {})
    state = states[stack]
    if state.get("locked"):
        # source: go pkg/backend/diy/lock.go checkForLock (the DIY backend's lock, which py errors.py reads as
        # ConcurrentUpdateError); the exit code is any non-zero (the SDK checks only that).
        print("error: the stack is currently locked by 1 lock(s). Either wait for the other process(es) to end or "
              "delete the lock file with `pulumi cancel`.", file=sys.stderr)
        return 255
    state["locked"] = os.getpid()
    _save(STATE, states)
    events = Events(event_log)
    # source: go apitype/events.go PreludeEvent {config}.
    events.send(preludeEvent={"config": {}})
    print(f"Updating ({stack})\n\n     Type                 Name     Status")
    config = _config(stack)
    run = _sagemaker_up if config.get(f"{PROJECT}:cloud") == "sagemaker" else _gce_up
    refused = run(stack, config, events, state)
    return _finish(events, state, stack, "up", refused)


def destroy(stack: str, event_log: str | None) -> int:
    state = _load(STATE, {})[stack]
    events = Events(event_log)
    events.send(preludeEvent={"config": {}})
    world = _load(WORLD, {"disks": {}, "instances": {}})
    retain = str(_config(stack).get(f"{PROJECT}:retainDataDisk", True)).lower() == "true"
    for urn, held in reversed(list(state["resources"].items())):
        events.send(resourcePreEvent={"metadata": _meta("delete", urn, held["type"])})
        out = held["outputs"]
        if held["type"] == INSTANCE:
            world["instances"].pop(f"{out['zone']}/{out['name']}", None)
        elif held["type"] == DISK and not retain:
            world["disks"].pop(f"{out['zone']}/{out['name']}", None)
        events.send(resOutputsEvent={"metadata": _meta("delete", urn, held["type"])})
    _save(WORLD, world)
    state.update(resources={}, outputs={})
    return _finish(events, state, stack, "destroy", None)


def _flag(argv: list[str], name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv else None


def _set_config(stack: str, key: str, value: str) -> None:
    path = Path(f"Pulumi.{stack}.yaml")
    doc = (yaml.safe_load(path.read_text()) or {}) if path.is_file() else {}
    doc.setdefault("config", {})
    doc["config"] = {**(doc["config"] or {}), key: value}
    path.write_text(yaml.safe_dump(doc, sort_keys=False))


def on_sigint(signum: int, frame: Any) -> None:
    # source: go cancellation_scope.go NewScope: the first ^C's notice, as a stdoutEvent and on stdout.
    CANCELLED.set()
    print("^C received; cancelling. If you would like to terminate immediately, press ^C again.\n"
          "Note that terminating immediately may lead to orphaned resources and other inconsistencies.", flush=True)


def main(argv: list[str]) -> int:
    with open(HOME / "argv.log", "a") as log:
        log.write(json.dumps(argv) + "\n")
    if argv == ["version"]:
        print("v3.259.0")  # source: py _stack.py _setup_event_log (CLI > 3.205.0: events over gRPC)
        return 0
    argv = argv[1:] if argv[:1] == ["--non-interactive"] else argv
    stack = _flag(argv, "--stack")
    states = _load(STATE, {})
    if argv[:2] == ["stack", "select"] or (argv[:1] in (["up"], ["destroy"]) and stack not in states):
        if stack in states:
            return 0
        # source: go backenderr.go "no stack named '%s' found"; exit 6 (go exit_codes.go).
        print(f"error: no stack named '{stack}' found", file=sys.stderr)
        return 6
    if argv[:2] == ["stack", "init"]:
        _save(STATE, {**states, argv[2]: {"resources": {}, "outputs": {}}})
        return 0
    if argv[:2] == ["config", "set"]:
        _set_config(str(stack), argv[2], argv[argv.index("--") + 1])
        return 0
    if argv[:2] == ["stack", "output"]:
        print(json.dumps(states[stack]["outputs"]))
        return 0
    if argv[:2] == ["stack", "history"]:
        # source: py _stack.py Stack.history: kind, startTime (%Y-%m-%dT%H:%M:%S.%fZ), message, environment,
        # config, result.
        print(json.dumps([{"kind": "update", "startTime": "2026-12-06T08:00:00.000000Z", "message": "",
                           "environment": {}, "config": {}, "result": "succeeded"}]))
        return 0
    if argv[:1] in (["up"], ["destroy"]):
        signal.signal(signal.SIGINT, on_sigint)
        return (up if argv[0] == "up" else destroy)(str(stack), _flag(argv, "--event-log"))
    # not stood in: any other command; the real CLI would answer, this one says it was not expected.
    print(f"pulumi stand-in: not stood in: {argv}", file=sys.stderr)
    return 255


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
