"""`gemma4-t4 preflight STACK --all-regions`: where would the stack fit, if not where it is?

Per region: the T4 quota and what is in use (GCE: NVIDIA_T4_GPUS, and the project's
GPUS_ALL_REGIONS over all of them; SageMaker: "<instance type> for endpoint usage", against the
instances endpoints hold there), and on GCE the zones that sell a T4 (with how many one VM may
take). The stack's own region comes first, then the others by name; the first that would work is
named with the exact `pulumi config set` lines that move the stack there.

No API says whether a zone has T4s free right now: a stockout shows only when the VM is created
(ZONE_RESOURCE_POOL_EXHAUSTED, whose message lists zones that have some). The report says which
zones sell T4s and where the quota allows them; the next zone is the fallback.

The decisions are pure functions of the API responses (dicts as the client libraries return
them), tested on recorded ones; the fetch functions only call the clouds' own client libraries.
"""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from .. import catalog
from ..errors import PROJECT
from .failures import cloud_message
from .preflight import EndpointQuota, Needs, PreflightError, endpoint_quota_name

SAGEMAKER_REGIONS_AT_ONCE = 8  # GCE needs three calls for every region; SageMaker a few per region


@dataclass(frozen=True)
class RegionRow:
    region: str
    ok: bool
    detail: str
    limit: float | None = None  # the regional quota (None: none reported)
    in_use: float | None = None
    zones: tuple[str, ...] = ()  # GCE: zones that sell the accelerator and the plan accepts
    zone: str = ""  # GCE: the zone the stack would move to


@dataclass(frozen=True)
class RegionsReport:
    cloud: str
    needed: str  # what each region must hold, in words
    rows: list[RegionRow]
    first: RegionRow | None
    config_lines: list[str] = field(default_factory=list)  # what moves the stack to `first`
    notes: list[str] = field(default_factory=list)


def _ordered(rows: Iterable[RegionRow], current: str) -> list[RegionRow]:
    """The stack's own region first, then the others by name; the first that works is the pick."""
    return sorted(rows, key=lambda row: (row.region != current, row.region))


# --- GCE ------------------------------------------------------------------------------------------


def _quota(quotas: Iterable[dict[str, Any]], metric: str) -> tuple[float, float] | None:
    found = next((q for q in quotas if q.get("metric") == metric), None)
    return None if found is None else (float(found.get("limit", 0)), float(found.get("usage", 0)))


def zone_offers(aggregated: dict[str, Any], accelerator: str) -> dict[str, int]:
    """{zone: most cards one VM may take} from acceleratorTypes.aggregatedList's items."""
    offers = {}
    for scope in aggregated.values():
        for kind in scope.get("accelerator_types", scope.get("acceleratorTypes", [])):
            if kind.get("name") == accelerator:
                zone = str(kind["zone"]).rsplit("/", 1)[-1]
                offers[zone] = int(kind.get("maximum_cards_per_instance", kind.get("maximumCardsPerInstance", 0)))
    return offers


def gce_regions(needs: Needs, regions: list[dict[str, Any]], project_doc: dict[str, Any],
                offers: dict[str, int], known_zones: frozenset[str] = catalog.GCE_T4_ZONES) -> RegionsReport:
    """regions: regions.list's items; project_doc: projects.get; offers: zone_offers()."""
    gpus, accelerator = needs.gpus, needs.accelerator
    needed = f"{gpus} x {accelerator} on one VM"
    notes = []
    world = _quota(project_doc.get("quotas", []), "GPUS_ALL_REGIONS")
    world_free = None if world is None else world[0] - world[1]
    if world is None:
        notes.append("no GPUS_ALL_REGIONS quota reported for the project: check IAM & Admin > Quotas")
    elif world_free is not None and world_free < gpus:
        new = " (new projects start at 0)" if world[0] == 0 else ""
        notes.append(f"GPUS_ALL_REGIONS: limit {world[0]:g}, in use {world[1]:g}{new}: no region can add {gpus}; "
                     f"request at least {world[1] + gpus:g} for the project (global), IAM & Admin > Quotas")
    rows, without = [], []
    for region in regions:
        name = region["name"]
        zones = sorted(str(z).rsplit("/", 1)[-1] for z in region.get("zones", []))
        selling = [z for z in zones if offers.get(z, 0) >= 1]
        if not selling:
            without.append(name)  # not a place to go: left out of the rows
            continue
        usable = [z for z in selling if offers[z] >= gpus and z in known_zones]
        quota = _quota(region.get("quotas", []), "NVIDIA_T4_GPUS")
        limit, in_use = quota if quota is not None else (None, None)
        parts = [f"sells {accelerator} in {', '.join(selling)}"]
        if unknown := [z for z in selling if z not in known_zones]:
            parts.append(f"{', '.join(unknown)} not in the catalog's zone list (the plan refuses "
                         f"{'them' if len(unknown) > 1 else 'it'} until it is added)")
        if small := [z for z in selling if offers[z] < gpus]:
            parts.append(f"{', '.join(small)} take{'s' * (len(small) == 1)} at most "
                         f"{min(offers[z] for z in small)} per VM")
        ok = bool(usable)
        if quota is None:
            parts.append("no NVIDIA_T4_GPUS quota reported")
            ok = False
        else:
            free = quota[0] - quota[1]
            parts.insert(0, f"quota {quota[0]:g}, in use {quota[1]:g}, free {free:g}"
                            + (" (new projects start at 0)" if quota[0] == 0 else ""))
            ok = ok and free >= gpus
        ok = ok and world_free is not None and world_free >= gpus
        rows.append(RegionRow(name, ok, "; ".join(parts), limit, in_use, tuple(usable),
                              zone=(needs.zone if needs.zone in usable else usable[0]) if usable else ""))
    if without:
        notes.append(f"{len(without)} region{'s' * (len(without) > 1)} sell{'s' * (len(without) == 1)} no "
                     f"{accelerator} ({', '.join(without)}): not listed")
    rows = _ordered(rows, needs.region)
    first = next((row for row in rows if row.ok), None)
    lines = [f"pulumi config set {PROJECT}:zone {first.zone}"] if first and first.zone != needs.zone else []
    return RegionsReport("gce", needed, rows, first, lines, notes)


def fetch_gce_regions(project: str, accelerator: str, **client_kwargs: Any) -> tuple[list[dict], dict, dict[str, int]]:
    """(regions.list items, projects.get, zone_offers) in three calls; ``client_kwargs`` go to each
    client (credentials, client_options)."""
    try:
        from google.api_core import exceptions as gexc
        from google.auth import exceptions as auth_exc
        from google.cloud import compute_v1
    except ImportError:
        raise PreflightError("google-cloud-compute is not installed: pip install google-cloud-compute") from None
    try:
        regions = [type(r).to_dict(r) for r in compute_v1.RegionsClient(**client_kwargs).list(project=project)]
        project_msg = compute_v1.ProjectsClient(**client_kwargs).get(project=project)
        pager = compute_v1.AcceleratorTypesClient(**client_kwargs).aggregated_list(
            request={"project": project, "filter": f'name = "{accelerator}"'})
        aggregated = {scope: type(scoped).to_dict(scoped) for scope, scoped in pager}
    except auth_exc.DefaultCredentialsError:
        raise PreflightError("no Google credentials: gcloud auth application-default login") from None
    except gexc.GoogleAPICallError as err:
        raise PreflightError(cloud_message(err) or f"Compute Engine API: {err.message}") from None
    return regions, type(project_msg).to_dict(project_msg), zone_offers(aggregated, accelerator)


# --- SageMaker ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RegionQuota:
    """One region as fetched: the endpoint quota, instances in use, the stack's own, the endpoints
    whose type could not be read (their config was deleted); or the error."""

    region: str
    quota: EndpointQuota | None = None
    in_use: int = 0
    own: int | None = None
    error: str = ""
    untyped: tuple[str, ...] = ()


def sagemaker_regions(needs: Needs, fetched: list[RegionQuota]) -> RegionsReport:
    """A region works if the stack's most instances fit its quota beside what other endpoints hold
    (the stack's own endpoint, where it runs, makes room as it goes)."""
    name = endpoint_quota_name(needs.instance_type)
    most = needs.most
    needed = f"{most} x {needs.instance_type}" + (f" (autoscaling from {needs.instances})" if most > needs.instances
                                                  else "")
    rows = []
    for region in fetched:
        if region.error:
            rows.append(RegionRow(region.region, False, region.error))
            continue
        if region.quota is None:
            rows.append(RegionRow(region.region, False, f"SageMaker does not offer {needs.instance_type} here"))
            continue
        limit = int(region.quota.value)
        others = region.in_use - (region.own or 0)
        source = "" if region.quota.applied else " (AWS default)"
        detail = f"\"{name}\" {limit}{source}, in use {region.in_use}, free {limit - region.in_use}"
        if region.own is not None:
            detail += f"; this stack's endpoint holds {region.own}"
        ok = limit - others >= most
        if not ok:
            detail += f"; request {others + most} (quota code {region.quota.code})"
        if region.untyped:
            detail += (f"; not counted: {', '.join(region.untyped)} (serving, endpoint config deleted, "
                       "type unknown)")
        rows.append(RegionRow(region.region, ok, detail, limit, region.in_use))
    notes = []
    if needs.region not in {r.region for r in fetched}:
        notes.append(f"the stack's region {needs.region} was not asked")
    rows = _ordered(rows, needs.region)
    first = next((row for row in rows if row.ok), None)
    lines = [f"pulumi config set aws:region {first.region}"] if first and first.region != needs.region else []
    return RegionsReport("sagemaker", needed, rows, first, lines, notes)


def sagemaker_region_names(regions: list[str] | None = None) -> list[str]:
    """The regions to ask: the given ones, else every region boto3 knows SageMaker in."""
    import boto3

    return list(regions) if regions else boto3.session.Session().get_available_regions("sagemaker")


def fetch_sagemaker_regions(instance_type: str, stack: str, regions: list[str],
                            profile: str | None = None) -> list[RegionQuota]:
    """Every region asked at once (a few at a time); a region that refuses is a row with the reason
    (an opt-in region this account has not enabled answers with an invalid-token error)."""
    from .preflight import fetch_sagemaker

    def one(region: str) -> RegionQuota:
        try:
            quota, in_use, own, untyped = fetch_sagemaker(region, instance_type, stack, profile)
        except PreflightError as err:
            if "no AWS credentials" in str(err) or "have expired" in str(err):  # the account's, not the region's
                raise
            reason = str(err).removeprefix("AWS: ")
            if "security token" in reason or "UnrecognizedClient" in reason:
                reason = f"not enabled for this account (opt-in region?): {reason}"
            return RegionQuota(region, error=reason[:200])
        return RegionQuota(region, quota, in_use, own, untyped=tuple(untyped))

    with ThreadPoolExecutor(max_workers=SAGEMAKER_REGIONS_AT_ONCE) as pool:
        return list(pool.map(one, regions))
