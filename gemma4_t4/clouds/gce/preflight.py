"""GCE's preflight: the region's NVIDIA_T4_GPUS and the project's GPUS_ALL_REGIONS quota (limit - usage),
and whether the zone offers the T4 (which zones of the region do). Decisions are pure functions of the
API responses (dicts), tested on recorded ones; the fetch functions only call google-cloud-compute.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ...checks import Check
from ...core.preflight import PreflightError
from ...errors import ConfigError, Set
from .failures import cloud_message


@dataclass(frozen=True)
class GceNeeds:
    """GCE's part of a stack's Needs: the VM's zone and its accelerators."""

    zone: str
    accelerator: str  # the accelerator type, e.g. nvidia-tesla-t4
    gpus: int = 1  # how many on the VM


def _quota(quotas: Iterable[dict[str, Any]], metric: str) -> dict[str, Any] | None:
    return next((q for q in quotas if q.get("metric") == metric), None)


def _quota_check(name: str, quota: dict[str, Any] | None, needed: int, where: str, fix_where: str) -> Check:
    if quota is None:
        return Check(name, False, f"no {name} quota reported for {where}",
                     f"check IAM & Admin > Quotas for {fix_where}")
    limit, usage = float(quota.get("limit", 0)), float(quota.get("usage", 0))
    free = limit - usage
    detail = f"limit {limit:g}, in use {usage:g}, free {free:g} in {where}"
    if free >= needed:
        return Check(name, True, detail)
    why = " (new projects start at 0)" if limit == 0 else ""
    return Check(name, False, detail + why,
                 f"request a {name} quota of at least {usage + needed:g} for {fix_where} (IAM & Admin > Quotas)")


def gce_checks(region: str, zone: str, accelerator: str, gpus: int, region_doc: dict[str, Any],
               project_doc: dict[str, Any], zones_offering: list[str]) -> list[Check]:
    """region_doc: regions.get; project_doc: projects.get; zones_offering: zones of the region
    that list ``accelerator`` in acceleratorTypes."""
    checks = [
        _quota_check("NVIDIA_T4_GPUS", _quota(region_doc.get("quotas", []), "NVIDIA_T4_GPUS"), gpus,
                     f"region {region}", f"region {region}"),
        _quota_check("GPUS_ALL_REGIONS", _quota(project_doc.get("quotas", []), "GPUS_ALL_REGIONS"), gpus,
                     "the project", "the project (global)"),
    ]
    if zone in zones_offering:
        checks.append(Check(f"{accelerator} in {zone}", True,
                            f"offered (also in: {', '.join(sorted(zones_offering))})"))
    elif zones_offering:
        checks.append(Check(f"{accelerator} in {zone}", False, f"{zone} does not offer {accelerator}",
                            f"pulumi config set gemma4-t4:zone {sorted(zones_offering)[0]} "
                            f"(offered in {', '.join(sorted(zones_offering))})"))
    else:
        checks.append(Check(f"{accelerator} in {zone}", False, f"no zone of {region} offers {accelerator}",
                            "pick another region's zone, e.g. pulumi config set gemma4-t4:zone us-central1-a"))
    return checks



def fetch_gce(project: str, region: str, accelerator: str) -> tuple[dict, dict, list[str]]:
    try:
        from google.api_core import exceptions as gexc
        from google.auth import exceptions as auth_exc
        from google.cloud import compute_v1
    except ImportError:
        raise PreflightError("google-cloud-compute is not installed: pip install google-cloud-compute") from None
    try:
        region_msg = compute_v1.RegionsClient().get(project=project, region=region)
        project_msg = compute_v1.ProjectsClient().get(project=project)
        zones = [z.rsplit("/", 1)[-1] for z in region_msg.zones]
        offering = []
        for zone in zones:
            listed = compute_v1.AcceleratorTypesClient().list(project=project, zone=zone)
            if any(a.name == accelerator for a in listed):
                offering.append(zone)
    except auth_exc.DefaultCredentialsError:
        raise PreflightError("no Google credentials: gcloud auth application-default login") from None
    except gexc.GoogleAPICallError as err:
        raise PreflightError(cloud_message(err) or f"Compute Engine API: {err.message}") from None
    return (type(region_msg).to_dict(region_msg), type(project_msg).to_dict(project_msg), offering)



def gcp_project(config: Mapping[str, Any], project: str | None) -> str:
    project = project or config.get("gcp:project")
    if not project:
        # The stack's config is missing a key: the user's to set (exit 2), not a failed check.
        raise ConfigError("gcp:project", "is not set: the checks ask the project `pulumi up` deploys to",
                          (Set("gcp:project", "PROJECT"), " (or pass --project PROJECT)"))
    return str(project)
