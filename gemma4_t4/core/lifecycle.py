"""Stop and start, whatever the cloud: what a stop or start did, what a stopped stack's disks bill, and
the refusal of a cloud with no stopped state. Each cloud's own stop/start is in its folder
(gemma4_t4/clouds/NAME/lifecycle.py)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from .targets import TargetError

# Our word for "the cloud's API has no such server" (404), beside the cloud's own statuses.
VM_ABSENT = "ABSENT"


Action = Literal["stop", "start"]
# Called while waiting: seconds so far, and what the cloud reports (e.g. {"status": "STOPPING"}).
TickCallback = Callable[[float, dict[str, Any]], None]


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


class Machine(ABC):
    """A VM its cloud can stop and start (Feature.STOP_START), with the API that reaches it: what `stop` and
    `start` act on, from a stack's outputs (Cloud.vm) or the VM's own names (Cloud.named_vm)."""

    @abstractmethod
    def stop(self, timeout_s: float = 600, interval_s: float = 5,
             on_tick: TickCallback | None = None) -> LifecycleResult:
        """Stop it and wait until it has stopped; one already stopped is left as it is."""

    @abstractmethod
    def start(self, timeout_s: float = 600, interval_s: float = 5,
              on_tick: TickCallback | None = None) -> LifecycleResult:
        """Start it and wait until it runs; one already running is left as it is."""

    def act(self, action: Action, timeout_s: float = 600, interval_s: float = 5,
            on_tick: TickCallback | None = None) -> LifecycleResult:
        return (self.stop if action == "stop" else self.start)(timeout_s, interval_s, on_tick)
