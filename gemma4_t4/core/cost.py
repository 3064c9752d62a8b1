"""What a stack costs, from its offline plan and the catalog's list prices: per hour while it
serves, per month while its VM is stopped (GCE: the disks), and per month after `pulumi destroy`."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import plan as offline
from .lifecycle import SAGEMAKER_NOT_STOPPABLE, DiskBill, disk_bill, total_usd_per_month


@dataclass
class CostEstimate:
    stack: str
    cloud: str
    running_usd_per_hour: float | None  # the stack's cost_per_hour_usd output
    stopped_usd_per_month: float | None  # None: no stopped state (SageMaker) or no catalog price
    after_destroy_usd_per_month: float | None  # the stack's billing_after_destroy_usd_per_month output
    disks: list[DiskBill] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _gce_disks(plan: offline.Plan) -> list[DiskBill]:
    bills = []
    for vm in plan.find("gcp:compute/instance:Instance"):
        boot = vm.inputs.get("bootDisk", {}).get("initializeParams", {})
        bills.append(disk_bill(f"{vm.name} (boot)", boot["type"], int(boot["size"]), vm.inputs["zone"]))
    bills += [disk_bill(d.name, d.inputs["type"], int(d.inputs["size"]), d.inputs["zone"])
              for d in plan.find("gcp:compute/disk:Disk")]
    return bills


def estimate(stack: str, overrides: list[str] | None = None, project_dir: Path | None = None) -> CostEstimate:
    """The stack's config refused is a ConfigError, as for `plan`."""
    project = offline.find_project(project_dir)
    result = offline.run_program(stack, offline.load_stack_config(stack, overrides or [], project),
                                 project_dir=project)
    outputs: dict[str, Any] = result.outputs
    cloud = outputs.get("cloud", "")
    estimate = CostEstimate(stack, cloud, outputs.get("cost_per_hour_usd"), None,
                            outputs.get("billing_after_destroy_usd_per_month"))
    if cloud == "gce":
        estimate.disks = _gce_disks(result)
        estimate.stopped_usd_per_month = total_usd_per_month(estimate.disks)
        estimate.notes.append("`gemma4-t4 stop --stack STACK` ends the machine and GPU bills and keeps both disks; "
                              "`pulumi destroy` deletes the VM and its boot disk (after_destroy: what still bills)")
    else:
        estimate.notes.append(SAGEMAKER_NOT_STOPPABLE)
    estimate.notes.append("catalog list prices (gemma4_t4/catalog): estimates for planning; the bill is the truth")
    return estimate
