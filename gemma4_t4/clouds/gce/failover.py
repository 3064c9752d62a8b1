"""`gemma4-t4 up` on GCE: where a new stack goes (the cheapest zone that sells the T4 where the project has quota,
from preflight's live answers), and where it goes next when creating the VM is refused for want of T4s in the
zone or of quota in the region; and the data disk such an attempt made, deleted only when no VM ever attached it.

How the provider prints the refusals: terraform-provider-google's
resourceComputeInstanceCreate wraps the operation's failure as "Error waiting for instance to create: MESSAGE"
(common_operation.go OperationWait, compute_operation.go ComputeOperationError.Error), the code
(ZONE_RESOURCE_POOL_EXHAUSTED, QUOTA_EXCEEDED) not printed, so the message is what is matched:
- a stock-out, "The zone 'projects/P/zones/Z' does not have enough resources available to fulfill the request.
  Try a different zone, or try again later." (cloud.google.com/compute/docs/troubleshooting/
  troubleshooting-resource-availability; hashicorp/terraform-provider-google#1052), or its
  "... fulfill the request.  '(resource type:compute)'." variant (ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS);
- a regional quota, "Quota 'NVIDIA_T4_GPUS' exceeded.  Limit: 1.0 in region us-central1." (GoogleCloudPlatform/
  ml-on-gcp dlvm/nvidia/README.md; "Quota 'CPUS' exceeded.  Limit: 8.0 in region us-east1." via Terraform,
  mesosphere-backup/terraform-dcos#61); the project's, "Quota 'GPUS_ALL_REGIONS' exceeded. Limit: 0.0 globally."
  (fastai/course-v3#165), which no move cures;
- the accelerator not sold in the zone, "The resource 'projects/P/zones/Z/acceleratorTypes/nvidia-tesla-t4' was
  not found" (hashicorp/terraform-provider-google#5860).
GCE puts one or two spaces after a sentence, so the patterns take any run of blanks.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ... import catalog
from ...components.gce.provider_answers import disk_never_attached
from ...core.capacity import RegionRow
from ...core.targets import TargetError
from .capacity import zone_offer, zones

STOCKOUT = re.compile(r"does\s+not\s+have\s+enough\s+resources\s+available\s+to\s+fulfill\s+the\s+request")
REGION_QUOTA = re.compile(r"Quota\s+'(?P<metric>[A-Z0-9_]+)'\s+exceeded\.\s+Limit:\s+[\d.]+\s+in\s+region\s+"
                          r"(?P<region>[a-z0-9-]+)")
GLOBAL_QUOTA = re.compile(r"Quota\s+'(?P<metric>[A-Z0-9_]+)'\s+exceeded\.\s+Limit:\s+[\d.]+\s+globally")
NOT_OFFERED = re.compile(r"zones/(?P<zone>[a-z0-9-]+)/acceleratorTypes/[\w-]+'\s+was\s+not\s+found")

# How many other zones `up` tries after the first before it stops and says where it tried.
MOVES = 4


@dataclass(frozen=True)
class Refusal:
    """Why GCE did not create the VM, as far as it says where else may work."""

    kind: str  # "stockout" (this zone), "region-quota" (every zone of the region), "global-quota" (nowhere)
    zone: str
    region: str
    said: str  # the provider's message, as printed

    @property
    def moves(self) -> bool:
        return self.kind != "global-quota"


def refusal(message: str, zone: str) -> Refusal | None:
    """The refusal MESSAGE (the VM's diagnostic) is, if it is one a move can cure or that stops every move."""
    region = catalog.region_of(zone)
    if STOCKOUT.search(message) or NOT_OFFERED.search(message):
        return Refusal("stockout", zone, region, message)
    if found := REGION_QUOTA.search(message):
        return Refusal("region-quota", zone, found["region"], message)
    if GLOBAL_QUOTA.search(message):
        return Refusal("global-quota", zone, region, message)
    return None


def price(zone: str, spot: bool) -> float:
    offer = zone_offer(zone)
    value = offer.spot_usd_per_hour if spot else offer.usd_per_hour
    return float("inf") if value is None else value


def cheapest_zone(rows: Iterable[RegionRow], spot: bool) -> str | None:
    """Of the zones preflight found usable (they sell the T4, the plan accepts them, the region's and the project's
    quota hold the VM's T4s), the cheapest; by name among equals."""
    usable = [zone for row in rows if row.ok for zone in zones(row)]
    return min(usable, key=lambda z: (price(z, spot), z)) if usable else None


def next_zones(rows: Iterable[RegionRow], refused: Refusal, tried: Iterable[str], spot: bool) -> list[str]:
    """Where to try next after REFUSED: the other usable zones of the same region first (a stock-out is one zone's),
    then the zones of the other regions with quota, cheapest first; a region whose quota refused is left out."""
    done = set(tried)
    usable = [(row.region, zone) for row in rows if row.ok for zone in zones(row) if zone not in done]
    same = [] if refused.kind == "region-quota" else sorted(z for r, z in usable if r == refused.region)
    others = sorted((z for r, z in usable if r != refused.region), key=lambda z: (price(z, spot), z))
    return same + others


# --- the data disk an attempt made ----------------------------------------------------------------


@dataclass(frozen=True)
class DiskState:
    name: str
    zone: str
    size_gb: int
    type: str
    never_attached: bool


def read_disk(compute: Any, project: str, zone: str, name: str) -> DiskState | None:
    """The disk as the Compute API describes it now (disks.get), None where there is none."""
    from google.api_core import exceptions as gexc

    try:
        disk = compute.disks.get(project=project, zone=zone, disk=name)
    except gexc.NotFound:
        return None
    except gexc.GoogleAPICallError as err:
        raise TargetError(f"reading the data disk {name} in {zone}: {err.message}") from None
    # Disk.users and lastAttachTimestamp ("[Output Only] Last attach timestamp", REST Resource: disks): a disk no
    # VM ever attached has neither, the criterion the component uses too (provider_answers.disk_never_attached).
    never = disk_never_attached(list(disk.users), disk.last_attach_timestamp)
    return DiskState(name, zone, int(disk.size_gb), str(disk.type_).rsplit("/", 1)[-1], never)


def delete_disk(compute: Any, project: str, zone: str, name: str, timeout_s: float = 300) -> None:
    """disks.delete, then its zone operation polled until DONE (an operation's own future ignores a stand-in's
    endpoint: lifecycle.Compute)."""
    from google.api_core import exceptions as gexc

    try:
        operation = compute.disks.delete_unary(project=project, zone=zone, disk=name)
        deadline = time.monotonic() + timeout_s
        while operation.status != compute.done:
            if time.monotonic() > deadline:
                raise TargetError(f"deleting the disk {name} in {zone}: not done after {timeout_s:.0f}s")
            time.sleep(2)
            operation = compute.operations.get(project=project, zone=zone, operation=operation.name)
    except gexc.NotFound:
        return
    except gexc.GoogleAPICallError as err:
        raise TargetError(f"deleting the empty data disk {name} in {zone}: {err.message}") from None
    if operation.error and operation.error.errors:
        raise TargetError(f"deleting the empty data disk {name} in {zone}: "
                          + "; ".join(f"{e.code}: {e.message}" for e in operation.error.errors))
