"""Stop and start, whatever the cloud: what a stop or start did, what a stopped stack's disks bill, and
the refusal of a cloud with no stopped state. Each cloud's own stop/start is in its folder
(gemma4_t4/clouds/NAME/lifecycle.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from .targets import TargetError

# Our word for "the cloud's API has no such server" (404), beside the cloud's own statuses.
VM_ABSENT = "ABSENT"


class NotStoppable(TargetError):
    """The stack's target has no stopped state (its cloud says why: Cloud.not_stoppable)."""


@dataclass(frozen=True)
class DiskBill:
    name: str
    type: str
    size_gb: int
    usd_per_month: float | None  # None: the catalog has no price for this disk type


@dataclass
class LifecycleResult:
    vm: str
    action: Literal["stop", "start"]
    status_before: str
    status_after: str
    changed: bool
    elapsed_s: float
    # What bills while the VM is stopped: its disks, at catalog list prices.
    disks: list[DiskBill] = field(default_factory=list)
    stopped_usd_per_month: float | None = None
    # What bills while it runs, on top of the disks: machine and GPUs (catalog list prices).
    running_usd_per_hour: float | None = None
    notes: list[str] = field(default_factory=list)


def total_usd_per_month(bills: list[DiskBill]) -> float | None:
    if any(b.usd_per_month is None for b in bills):
        return None
    return round(sum(b.usd_per_month or 0.0 for b in bills), 2)
