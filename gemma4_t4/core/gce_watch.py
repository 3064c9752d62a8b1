"""What a GCE stack's VM says of itself without SSH, through the Compute Engine API: its status,
and the first-boot phase its guest publishes as guest attributes.

The guest writes namespace ``gemma4-t4`` (keys ``phase``, ``detail``, ``history``) to its metadata
server; the operator reads them with instances.getGuestAttributes and ``queryPath=gemma4-t4/``
(https://cloud.google.com/compute/docs/reference/rest/v1/instances/getGuestAttributes: a
GuestAttributes whose ``queryValue.items`` are ``{namespace, key, value}``). Before the guest wrote
anything the API answers 404, which clients read as "not written yet" and keep polling
(GoogleCloudPlatform/compute-image-tools, e2e compute/instance.go ``WaitForGuestAttributes``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .lifecycle import Compute, Vm
from .targets import TargetError

NAMESPACE = "gemma4-t4"
# The guest's phases in the order a first boot passes them (HELPERS' contract with the guest).
# Our word for "the API has no such VM" (404), beside Compute's own statuses (RUNNING, STAGING, ...).
VM_ABSENT = "ABSENT"
PHASES = ("provision", "driver", "reboot", "vllm-install", "model-download", "loading", "serving", "failed")


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
