"""What stops a forgotten VM's bill: GCE's run-time limit (maxRunHours, in the VM's scheduling) and the guest's idle
stop (idleStopMinutes), as the cost_guards output reports them."""

import pulumi_gcp as gcp

from gemma4_t4 import catalog

from ..base import CostGuard, cost_guard
from .settings import GceT4ServerSettings, TerminationAction


def scheduling(settings: GceT4ServerSettings) -> gcp.compute.InstanceSchedulingArgs:
    termination = settings.termination_action or (TerminationAction.STOP if settings.max_run_hours or settings.spot
                                                  else None)
    return gcp.compute.InstanceSchedulingArgs(
        on_host_maintenance=settings.on_host_maintenance.value,
        automatic_restart=not settings.spot,
        preemptible=settings.spot,
        provisioning_model="SPOT" if settings.spot else "STANDARD",
        instance_termination_action=termination.value if termination else None,
        max_run_duration=gcp.compute.InstanceSchedulingMaxRunDurationArgs(seconds=settings.max_run_hours * 3600)
        if settings.max_run_hours else None,
    )


def cost_guards(settings: GceT4ServerSettings, health_bound_minutes: int,
                usd_per_hour: float | None) -> list[CostGuard]:
    """The VM's guards: the guest's idle stop (with its health bound) and GCE's run-time limit."""
    idle, hours = settings.idle_stop_minutes, settings.max_run_hours
    return [
        cost_guard("idleStopMinutes", str(idle) if idle else None,
                   f"the VM stops itself after {idle} min without a request, and when a boot whose vLLM never "
                   f"answered makes no progress for {catalog.HEALTH_STALL_MINUTES} min or runs past "
                   f"{health_bound_minutes} min",
                   "nothing stops a VM left idle, or one whose vLLM never becomes healthy", usd_per_hour),
        cost_guard("maxRunHours", str(hours) if hours else None,
                   f"GCE stops the VM after {hours} h running, whatever its guest does",
                   "nothing bounds how long the VM runs (a client that keeps it busy, a guest whose idle stop "
                   "cannot run)", usd_per_hour),
    ]
