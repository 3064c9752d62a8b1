"""Stop and start a GCE stack's VM without destroying it, through the Compute Engine API
(google-cloud-compute), waiting for the state, and saying what bills meanwhile; and what the VM says of
itself without SSH (VmWatch: its status and the first-boot phase its guest publishes).

A stopped VM keeps its boot disk, its data disk and its config; GCE bills the disks (and static
addresses: this stack has none) but not the machine or the GPU. After `start` the guest comes back
by itself: the provision unit re-checks every step at boot and the vLLM unit starts.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ... import catalog
from ...catalog.gce import GCE_BILLED_WHILE_STOPPED
from ...components.gce import cost
from ...core.lifecycle import VM_ABSENT, DiskBill, LifecycleResult, Machine, TickCallback, total_usd_per_month
from ...core.targets import TargetError
from .failures import cloud_message

# Instance.status values (compute v1): TERMINATED is what a stopped VM reports.
STOPPED = ("TERMINATED", "STOPPED")
RUNNING = "RUNNING"


GUEST_COMES_BACK = ("the guest comes back by itself: gemma4-t4-provision re-checks each step at boot (disk, swap, "
                    "driver, vLLM, clamp) and gemma4-vllm starts; one run measured 362 s to healthy on a warm cache")


@dataclass(frozen=True)
class Vm:
    project: str
    zone: str
    instance: str

    def __str__(self) -> str:
        return f"{self.instance} ({self.zone}, project {self.project})"



# --- the API ---------------------------------------------------------------------------------------


class Compute:
    """The three Compute Engine clients stop/start needs, on one endpoint (a stand-in in the tests)."""

    def __init__(self, endpoint: str | None = None):
        try:
            from google.api_core.client_options import ClientOptions
            from google.auth import exceptions as auth_exc
            from google.cloud import compute_v1
        except ImportError:
            raise TargetError("google-cloud-compute is not installed: pip install google-cloud-compute") from None
        kwargs: dict[str, Any] = {}
        if endpoint:
            from google.auth.credentials import AnonymousCredentials

            kwargs = {"credentials": AnonymousCredentials(), "client_options": ClientOptions(api_endpoint=endpoint)}
        try:
            self.instances = compute_v1.InstancesClient(**kwargs)
            self.disks = compute_v1.DisksClient(**kwargs)
            # Polled here rather than through the operation's own future, whose client ignores the endpoint.
            self.operations = compute_v1.ZoneOperationsClient(**kwargs)
        except auth_exc.DefaultCredentialsError:
            raise TargetError("no Google credentials: gcloud auth application-default login") from None
        self.done = compute_v1.Operation.Status.DONE

    def call(self, what: str, fn: Callable[..., Any], forbidden: Any = None, **kwargs: Any) -> Any:
        """FN(**KWARGS); FORBIDDEN (when not None) where the caller may not read it: an operator granted the
        stack's operator role on the VM alone reads neither its disks nor the zone's operations."""
        from google.api_core import exceptions as gexc
        from google.auth import exceptions as auth_exc

        try:
            return fn(**kwargs)
        except gexc.Forbidden as err:
            if forbidden is None:
                raise TargetError(cloud_message(err) or f"Compute Engine API: {err.message}") from None
            return forbidden
        except gexc.NotFound:
            raise TargetError(f"{what} not found: was the stack destroyed, or the VM deleted outside Pulumi? "
                              "(`pulumi refresh`, then `pulumi up` makes it again)") from None
        except auth_exc.DefaultCredentialsError:
            raise TargetError("no Google credentials: gcloud auth application-default login") from None
        except gexc.GoogleAPICallError as err:
            raise TargetError(cloud_message(err) or f"Compute Engine API: {err.message}") from None


def _last(url: str) -> str:
    return url.rsplit("/", 1)[-1]


def disk_bill(name: str, disk_type: str, size_gb: int, zone: str) -> DiskBill:
    return DiskBill(name, disk_type, size_gb, cost.disk_usd_per_month(catalog.region_of(zone), disk_type, size_gb))



def disk_bills(compute: Compute, vm: Vm, instance: Any) -> list[DiskBill]:
    """Every disk attached to the VM, as the API describes it now."""
    bills = []
    for attached in instance.disks:
        name = _last(attached.source)
        disk = compute.call(f"disk {name}", compute.disks.get, forbidden=False, project=vm.project, zone=vm.zone,
                            disk=name)
        if disk is False:  # the operator role is on the VM only: the disks' bills are then not listed
            return []
        bills.append(disk_bill(name, _last(disk.type_), int(disk.size_gb), vm.zone))
    return bills


def running_usd_per_hour(instance: Any, zone: str) -> float | None:
    """Machine and GPUs at catalog list prices (a Spot VM's at the Spot prices); None if the catalog lacks one."""
    # Scheduling.provisioning_model: "SPOT" or "STANDARD" (Compute Engine API, instances resource).
    spot = getattr(getattr(instance, "scheduling", None), "provisioning_model", "") == "SPOT"
    gpus = [(_last(a.accelerator_type), a.accelerator_count) for a in instance.guest_accelerators]
    return cost.machine_and_gpus_usd_per_hour(_last(instance.machine_type), gpus, spot, catalog.region_of(zone))


def _operation_error(operation: Any) -> str:
    errors = [f"{e.code}: {e.message}" for e in operation.error.errors] if operation.error else []
    return "; ".join(errors) or operation.http_error_message or "unknown error"


class _Waiter:
    def __init__(self, compute: Compute, vm: Vm, timeout_s: float, interval_s: float, on_tick: TickCallback | None):
        self.compute, self.vm, self.interval_s = compute, vm, interval_s
        self.on_tick = on_tick or (lambda elapsed, info: None)
        self.start = time.monotonic()
        self.deadline = self.start + timeout_s

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.start

    def _sleep(self, what: str) -> None:
        if time.monotonic() > self.deadline:
            raise TargetError(f"{self.vm}: still {what} after {self.elapsed:.0f}s; see the console's operations log")
        time.sleep(self.interval_s)

    def instance(self) -> Any:
        return self.compute.call(f"instance {self.vm}", self.compute.instances.get, project=self.vm.project,
                                 zone=self.vm.zone, instance=self.vm.instance)

    def operation(self, operation: Any, action: str) -> None:
        while operation.status != self.compute.done:
            self.on_tick(self.elapsed, {"operation": f"{action} {operation.status.name}"})
            self._sleep(f"waiting for the {action} operation")
            polled = self.compute.call(f"operation {operation.name}", self.compute.operations.get, forbidden=False,
                                       project=self.vm.project, zone=self.vm.zone, operation=operation.name)
            if polled is False:  # an operator on the VM alone: the VM's own status says when it is done
                return
            operation = polled
        if operation.error or operation.http_error_status_code >= 400:
            message = _operation_error(operation)
            if "RESOURCE_POOL_EXHAUSTED" in message:
                message += (" -- no T4 is free in the zone right now; the VM stays stopped (billing only its disks): "
                            "start it again later")
            raise TargetError(f"{action} {self.vm} failed: {message}")

    def status(self, wanted: tuple[str, ...]) -> str:
        while True:
            status = self.instance().status
            if status in wanted:
                return status
            self.on_tick(self.elapsed, {"status": status})
            self._sleep(status)


def check_label(vm: Vm, instance: Any) -> None:
    """The VM is one the component made (catalog.GCE_APP_LABEL), else TargetError before any change."""
    key, value = catalog.GCE_APP_LABEL
    labels = dict(getattr(instance, "labels", None) or {})
    if labels.get(key) != value:
        raise TargetError(f"{vm} has no label {key}={value}: it is not a VM gemma4-t4 made, so stop and start leave "
                          f"it alone (its labels: {', '.join(f'{k}={v}' for k, v in labels.items()) or 'none'})")


def stop(compute: Compute, vm: Vm, timeout_s: float = 600, interval_s: float = 5,
         on_tick: TickCallback | None = None) -> LifecycleResult:
    """Stop the VM and wait until it is TERMINATED; a VM already stopped is left as it is."""
    wait = _Waiter(compute, vm, timeout_s, interval_s, on_tick)
    instance = wait.instance()
    check_label(vm, instance)
    before, disks = instance.status, disk_bills(compute, vm, instance)
    if before not in STOPPED:
        if before != "STOPPING":
            wait.operation(compute.call(f"stop {vm}", compute.instances.stop_unary, project=vm.project,
                                        zone=vm.zone, instance=vm.instance), "stop")
        after = wait.status(STOPPED)
    else:
        after = before
    notes = [] if before not in STOPPED else [f"already stopped ({before}): nothing to do"]
    notes.append(f"GCE bills a stopped VM's {' and '.join(GCE_BILLED_WHILE_STOPPED)}, not its machine or GPU: here the "
                 "disks above (catalog list prices); the ephemeral external address is released")
    return LifecycleResult(str(vm), "stop", before, after, before not in STOPPED, wait.elapsed, disks,
                           total_usd_per_month(disks), running_usd_per_hour(instance, vm.zone), notes)


def start(compute: Compute, vm: Vm, timeout_s: float = 600, interval_s: float = 5,
          on_tick: TickCallback | None = None) -> LifecycleResult:
    """Start the VM and wait until it is RUNNING; a VM already running is left as it is."""
    wait = _Waiter(compute, vm, timeout_s, interval_s, on_tick)
    instance = wait.instance()
    check_label(vm, instance)
    before, disks = instance.status, disk_bills(compute, vm, instance)
    if before == "SUSPENDED":
        raise TargetError(f"{vm} is suspended, not stopped: gcloud compute instances resume {vm.instance} "
                          f"--zone {vm.zone} --project {vm.project}")
    if before != RUNNING:
        if before == "STOPPING":
            wait.status(STOPPED)  # a VM that is stopping cannot be started until it has stopped
        if before not in ("PROVISIONING", "STAGING"):
            wait.operation(compute.call(f"start {vm}", compute.instances.start_unary, project=vm.project,
                                        zone=vm.zone, instance=vm.instance), "start")
        after = wait.status((RUNNING,))
    else:
        after = before
    running = running_usd_per_hour(instance, vm.zone)
    notes = [] if before != RUNNING else ["already running: nothing to do"]
    notes.append(GUEST_COMES_BACK)
    if running is not None:
        notes.append(f"billing again: machine and GPU ${running}/h plus the disks (catalog list prices)")
    return LifecycleResult(str(vm), "start", before, after, before != RUNNING, wait.elapsed, disks,
                           total_usd_per_month(disks), running, notes)


@dataclass(frozen=True)
class GceMachine(Machine):
    """A GCE VM that `stop` and `start` act on, through the Compute API (COMPUTE_ENDPOINT: a stand-in's, in the
    tests)."""

    vm: Vm
    compute_endpoint: str | None = None

    def __str__(self) -> str:
        return str(self.vm)

    def stop(self, timeout_s: float = 600, interval_s: float = 5,
             on_tick: TickCallback | None = None) -> LifecycleResult:
        return stop(Compute(self.compute_endpoint), self.vm, timeout_s, interval_s, on_tick)

    def start(self, timeout_s: float = 600, interval_s: float = 5,
              on_tick: TickCallback | None = None) -> LifecycleResult:
        return start(Compute(self.compute_endpoint), self.vm, timeout_s, interval_s, on_tick)


NAMESPACE = "gemma4-t4"
# The guest's phases in the order a first boot passes them (the contract with cloudinit/scripts/guest_attributes.py):
# `retrying`, a failure the guest heals by trying again; `failed`, one it does not retry (a person must act).
PHASES = ("provision", "driver", "reboot", "vllm-install", "model-download", "loading", "serving", "update",
          "retrying", "failed")


@dataclass(frozen=True)
class Phase:
    phase: str
    started: int  # epoch seconds, the guest's clock
    seconds: float  # until the next phase began; the current one: so far


@dataclass
class BootView:
    """One look at the VM: status (None: no such VM), the guest's phase, and why a part is unknown."""

    vm_status: str | None = None  # Compute's status, VM_ABSENT, or None when the API could not be read
    phase: str | None = None  # None: the guest has written nothing yet
    detail: str = ""
    phases: list[Phase] = field(default_factory=list)
    note: str = ""  # why the API could not be read (credentials, a role), shown once


def parse_phases(attributes: dict[str, str], now: float) -> tuple[str | None, str, list[Phase]]:
    """(current phase, its detail, the phases so far with their times) from the guest's keys; a
    malformed history entry is skipped (a write is best effort on the guest)."""
    began: list[tuple[str, int]] = []
    for entry in attributes.get("history", "").split():
        name, _, at = entry.partition("@")
        if name and at.isdigit():
            began.append((name, int(at)))
    phases = [Phase(name, at, float((began[i + 1][1] if i + 1 < len(began) else now) - at))
              for i, (name, at) in enumerate(began)]
    phase = attributes.get("phase") or (began[-1][0] if began else None)
    return phase, attributes.get("detail", ""), phases


class VmWatch:
    """Reads the VM's status and guest attributes; an API that cannot be read (no credentials, no
    role) is noted, never fatal: `wait` still watches /health through the tunnel."""

    def __init__(self, vm: Vm, compute: Callable[[], Compute]):
        self.vm = vm
        self._make_compute = compute
        self._compute: Compute | None = None
        self._unreadable = ""
        self._last: tuple[float, BootView] | None = None

    def _client(self) -> Compute | None:
        if self._compute is None and not self._unreadable:
            try:
                self._compute = self._make_compute()
            except TargetError as err:
                self._unreadable = f"the VM's status and boot phases are not shown: {err}"
        return self._compute

    def look(self, max_age_s: float = 2.0) -> BootView:
        """The VM now, or as seen less than MAX_AGE_S ago (one poll asks once, not per caller)."""
        if self._last is not None and time.monotonic() - self._last[0] < max_age_s:
            return self._last[1]
        view = self._look()
        self._last = (time.monotonic(), view)
        return view

    def _look(self) -> BootView:
        compute = self._client()
        if compute is None:
            return BootView(note=self._unreadable)
        from google.api_core import exceptions as gexc
        from google.auth import exceptions as auth_exc
        from google.cloud import compute_v1

        vm = self.vm
        try:
            try:
                status = str(compute.instances.get(project=vm.project, zone=vm.zone, instance=vm.instance).status)
            except gexc.NotFound:
                return BootView(vm_status=VM_ABSENT)
            request = compute_v1.GetGuestAttributesInstanceRequest(
                project=vm.project, zone=vm.zone, instance=vm.instance, query_path=f"{NAMESPACE}/")
            try:
                answer = compute.instances.get_guest_attributes(request=request)
            except gexc.NotFound:
                return BootView(vm_status=status)  # the guest has written nothing yet
        except (gexc.GoogleAPICallError, auth_exc.GoogleAuthError) as err:
            from .failures import cloud_message

            why = cloud_message(err) or getattr(err, "message", str(err))
            return BootView(note=f"the Compute API did not answer ({why}): boot phases are not shown")
        attributes = {item.key: item.value for item in answer.query_value.items if item.namespace == NAMESPACE}
        phase, detail, phases = parse_phases(attributes, time.time())
        return BootView(vm_status=status, phase=phase, detail=detail, phases=phases)


def describe_vm(view: BootView, vm: Vm) -> dict[str, Any]:
    """The view as status lines (key: value) for `status` and the wait ticker."""
    info: dict[str, Any] = {}
    if view.note:
        return info
    info["vm"] = f"no VM {vm.instance} in {vm.zone} yet" if view.vm_status == VM_ABSENT else view.vm_status
    if view.phase:
        info["phase"] = f"{view.phase} ({view.detail})" if view.detail else view.phase
    return info
