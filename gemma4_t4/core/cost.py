"""What a stack costs, from its offline plan and the catalog's list prices: per hour while it
serves, per month while its VM is stopped (GCE: the disks), and per month after `pulumi destroy`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .lifecycle import DiskBill


@dataclass(frozen=True)
class CostItem:
    """A cost beside the serving hours: ``usd`` per ``per`` ("build": each `up` that builds the image;
    "month": while the stack is up), with the catalog prices it is made of."""
    name: str
    usd: float
    per: str
    source: str


@dataclass
class CostEstimate:
    stack: str
    cloud: str
    running_usd_per_hour: float | None  # the stack's cost_per_hour_usd output
    after_destroy_usd_per_month: float | None  # the stack's billing_after_destroy_usd_per_month output
    # [fewest, most] instances' $/h, as `plan --json` names it: an autoscaled endpoint's range
    # (cost_per_hour_usd_max), else the one price twice; None without a price.
    running_usd_per_hour_range: list[float] | None = None
    stoppable: bool = False  # whether the stack has a stopped state (a VM), filled in by its cloud
    stopped_usd_per_month: float | None = None  # None: no stopped state, or no catalog price
    disks: list[DiskBill] = field(default_factory=list)
    extras: list[CostItem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # Where running_usd_per_hour is None because the catalog lacks a price: what the priced parts come to (a
    # floor, filled in by the cloud where it can price a part), what that floor covers, and the catalog items
    # with no price there (e.g. "disk:pd-ssd:gb-month in europe-west4").
    running_usd_per_hour_at_least: float | None = None
    at_least_covers: str = ""
    unpriced: list[str] = field(default_factory=list)

    @classmethod
    def from_outputs(cls, stack: str, outputs: dict[str, Any]) -> CostEstimate:
        """What the contract's outputs say; the stack's cloud adds the rest (gemma4_t4.clouds)."""
        low = outputs.get("cost_per_hour_usd")
        return cls(stack, outputs.get("cloud", ""), low, outputs.get("billing_after_destroy_usd_per_month"),
                   None if low is None else [low, outputs.get("cost_per_hour_usd_max") or low])
