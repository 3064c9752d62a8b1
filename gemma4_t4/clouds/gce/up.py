"""GCE's part of `gemma4-t4 up` and `down`: the user's gcloud project, the zone of a new stack, the next zone after
a refusal (failover.py), and the data disk that bills after `down`."""

from __future__ import annotations

import configparser
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ... import catalog
from ...core.capacity import RegionsReport
from ...core.deploy import Attempt
from ...core.preflight import Needs
from ...core.targets import TargetError
from ...errors import PROJECT
from ..base import Move, Placement
from . import capacity, failover, lifecycle, preflight
from .preflight import GceNeeds

INSTANCE = "gcp:compute/instance:Instance"
DISK = "gcp:compute/disk:Disk"


def gcloud_project(environ: Mapping[str, str] = os.environ) -> str | None:
    """The project gcloud would use: CLOUDSDK_CORE_PROJECT, else `[core] project` of the active configuration,
    $CLOUDSDK_CONFIG/configurations/config_NAME, NAME from $CLOUDSDK_CONFIG/active_config (default "default";
    CLOUDSDK_CONFIG defaults to ~/.config/gcloud). Source: `gcloud topic configurations` and
    https://cloud.google.com/sdk/docs/configurations ("properties ... stored in configurations"; the
    CLOUDSDK_SECTION_NAME environment variables override them)."""
    if environ.get("CLOUDSDK_CORE_PROJECT"):
        return environ["CLOUDSDK_CORE_PROJECT"]
    root = Path(environ.get("CLOUDSDK_CONFIG") or Path.home() / ".config" / "gcloud")
    active = root / "active_config"
    name = (active.read_text().strip() if active.is_file() else "") or environ.get("CLOUDSDK_ACTIVE_CONFIG_NAME") \
        or "default"
    parser = configparser.ConfigParser()
    try:
        parser.read(root / "configurations" / f"config_{name}")
    except configparser.Error:
        return None
    return parser.get("core", "project", fallback=None) or None


def user_config(config: Mapping[str, Any]) -> dict[str, str]:
    if config.get("gcp:project"):
        return {}
    project = gcloud_project()
    return {"gcp:project": project} if project else {}


def client_kwargs(endpoint: str | None) -> dict[str, Any]:
    if not endpoint:
        return {}
    from google.api_core.client_options import ClientOptions
    from google.auth.credentials import AnonymousCredentials

    return {"credentials": AnonymousCredentials(), "client_options": ClientOptions(api_endpoint=endpoint)}


def regions(config: Mapping[str, Any], needs: Needs[GceNeeds], endpoint: str | None) -> RegionsReport:
    """preflight --all-regions' live answer: per region the T4 quota and the zones that sell it."""
    project = preflight.gcp_project(config, None)
    found, project_doc, offers = capacity.fetch_gce_regions(project, needs.own.accelerator, **client_kwargs(endpoint))
    return capacity.gce_regions(needs, found, project_doc, offers)


def _spot(config: Mapping[str, Any]) -> bool:
    return str(config.get(f"{PROJECT}:spot", "false")).lower() == "true"


def place(config: Mapping[str, Any], needs: Needs[GceNeeds], choose: bool, endpoint: str | None) -> Placement:
    """Where a stack goes: with CHOOSE (a new stack, no zone given), the cheapest zone preflight finds usable."""
    report = regions(config, needs, endpoint)
    lines = [f"{'OK' if row.ok else 'no'}  {row.region}: {row.detail}" for row in report.rows]
    if not choose:
        return Placement({}, lines, report)
    zone = failover.cheapest_zone(report.rows, _spot(config))
    if zone is None:
        raise TargetError("no region has a T4 for this project now: " + "; ".join(report.notes or lines[:3])
                          + " (request the quota: `gemma4-t4 preflight STACK --all-regions` names it)")
    price = failover.price(zone, _spot(config))
    return Placement({f"{PROJECT}:zone": zone}, [*lines, f"zone {zone}: the cheapest usable (${price:.4f}/h for "
                                                           "machine and T4 at list price)"], report)


def spot_offer(zone: str) -> str:
    offer = capacity.zone_offer(zone)
    if offer.spot_usd_per_hour is None or offer.usd_per_hour is None:
        return ""
    return (f"Spot in {zone}: ${offer.spot_usd_per_hour:.4f}/h instead of ${offer.usd_per_hour:.4f}/h for machine and "
            "T4; GCE may preempt a Spot VM at any time: it is stopped (terminationAction STOP), both disks stay and "
            "bill, and `gemma4-t4 start -s STACK` brings it back when T4s are free again (`--spot` takes it)")


def recover(attempt: Attempt, config: Mapping[str, Any], placement: Placement, tried: list[str],
            endpoint: str | None) -> Move | None:
    """After an `up` that failed on the VM: the move that may cure it, the empty disk it made deleted first; None
    when the failure is not one a move cures."""
    failed = attempt.failed_on(INSTANCE)
    zone = str(config[f"{PROJECT}:zone"])
    found = failover.refusal(failed.message, zone) if failed is not None else None
    if found is None:
        return None
    if not found.moves:
        return Move("", [f"{zone}: {found.said}"], stop="the project's own GPU quota (GPUS_ALL_REGIONS) allows no "
                    "more T4s in any region: request more (IAM & Admin > Quotas), then `gemma4-t4 up` again")
    lines = [f"{zone}: {'no T4 free in the zone' if found.kind == 'stockout' else 'no quota in ' + found.region}"]
    disk = _empty_disk(attempt, config, zone, endpoint)
    if isinstance(disk, str):
        return Move("", [*lines, disk], stop="the data disk holds data: the stack stays in its zone")
    if disk is not None:
        lines.append(f"deleted the empty data disk {disk.name} in {zone} ({disk.size_gb} GB) this attempt made")
    report = placement.report
    rows = report.rows if report is not None else []
    nexts = failover.next_zones(rows, found, tried, _spot(config))
    if not nexts:
        return Move("", lines, stop=f"no other zone with quota is left (tried {', '.join(tried)})")
    return Move(nexts[0], [*lines, f"moving to {nexts[0]}" + (" (same region)" if catalog.region_of(nexts[0]) ==
                                                                catalog.region_of(zone) else "")])


def _empty_disk(attempt: Attempt, config: Mapping[str, Any], zone: str,
                endpoint: str | None) -> failover.DiskState | str | None:
    """The data disk this attempt made, deleted when no VM ever attached it (it holds nothing); a disk that held
    data (attached once, or not made by this attempt: adopted, kept from before) is never deleted: its reason."""
    found = attempt.state_of(DISK)
    if found is None:
        return None
    urn, state = found
    name = str(state.get("name") or urn.rsplit("::", 1)[-1])
    project = preflight.gcp_project(config, None)
    compute = lifecycle.Compute(endpoint)
    disk = failover.read_disk(compute, project, zone, name)
    if disk is None:
        return None
    if urn not in attempt.created or not disk.never_attached:
        return (f"the data disk {name} in {zone} ({disk.size_gb} GB) was not made empty by this attempt: it is never "
                "deleted here, and the stack cannot move away from it without leaving it billing; try again later "
                "(`gemma4-t4 up`), or move it yourself (docs/gce.md)")
    failover.delete_disk(compute, project, zone, name)
    return disk


def after_down(outputs: Mapping[str, Any], delete_data: bool, endpoint: str | None) -> list[str]:
    """What still bills after `down` (the kept data disk), deleted with DELETE_DATA."""
    name, target = outputs.get("data_disk_name"), outputs.get("target") or {}
    if not name or not target:
        return ["nothing of the stack is left billing"]
    compute = lifecycle.Compute(endpoint)
    disk = failover.read_disk(compute, target["project"], target["zone"], name)
    if disk is None:
        return ["nothing of the stack is left billing (the data disk was not kept: retainDataDisk false)"]
    bill = lifecycle.disk_bill(name, disk.type, disk.size_gb, disk.zone)
    cost = "-" if bill.usd_per_month is None else f"${bill.usd_per_month:,.2f}/month"
    if not delete_data:
        return [f"still billing: the data disk {name} in {disk.zone}, {disk.size_gb} GB, {cost} at list price (the "
                "model and the vLLM environment: the next `gemma4-t4 up` adopts it); `gemma4-t4 down --delete-data` "
                "deletes it"]
    failover.delete_disk(compute, target["project"], target["zone"], name)
    return [f"deleted the data disk {name} in {disk.zone} ({disk.size_gb} GB): nothing of the stack is left billing"]
