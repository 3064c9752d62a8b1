"""GCE's regions for `preflight --all-regions`: per region the T4 quota and its use (NVIDIA_T4_GPUS, and
the project's GPUS_ALL_REGIONS over all of them), and the zones that sell a T4 (with how many one VM
may take); three calls cover every region.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from ... import catalog
from ...components.gce import cost
from ...core.capacity import RegionRow, RegionsReport, ordered
from ...core.offers import Offer
from ...core.preflight import Needs, PreflightError
from ...errors import PROJECT
from .failures import cloud_message
from .preflight import GceNeeds


@dataclass(frozen=True)
class GceRegion:
    """GCE's part of a region's row: the zones that sell the accelerator and the plan accepts, and the one the stack
    would move to ("" none)."""

    zones: tuple[str, ...] = ()
    zone: str = ""

    def place(self) -> str:
        return f"zone {self.zone}" if self.zone else ""

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def zones(row: RegionRow) -> tuple[str, ...]:
    """The usable zones of a GCE report's ROW."""
    return row.within.zones if isinstance(row.within, GceRegion) else ()


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


def gce_regions(needs: Needs[GceNeeds], regions: list[dict[str, Any]], project_doc: dict[str, Any],
                offers: dict[str, int], known_zones: frozenset[str] = catalog.GCE_T4_ZONES) -> RegionsReport:
    """regions: regions.list's items; project_doc: projects.get; offers: zone_offers()."""
    gpus, accelerator, zone = needs.own.gpus, needs.own.accelerator, needs.own.zone
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
        moved_to = (zone if zone in usable else usable[0]) if usable else ""
        rows.append(RegionRow(name, ok, "; ".join(parts), limit, in_use, GceRegion(tuple(usable), moved_to)))
    if without:
        notes.append(f"{len(without)} region{'s' * (len(without) > 1)} sell{'s' * (len(without) == 1)} no "
                     f"{accelerator} ({', '.join(without)}): not listed")
    rows = ordered(rows, needs.region)
    first = next((row for row in rows if row.ok), None)
    to = first.within.zone if first is not None and isinstance(first.within, GceRegion) else zone
    lines = [f"pulumi config set {PROJECT}:zone {to}"] if to != zone else []
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


T4_SHAPE = f"{catalog.n1_standard_for(1)}+T4"


def t4_offers() -> list[Offer]:
    """Every GCE zone the catalog knows sells a T4: an n1-standard-1 with one T4, on demand and Spot."""
    return [zone_offer(zone) for zone in catalog.GCE_T4_ZONES]


def zone_offer(zone: str) -> Offer:
    region = catalog.region_of(zone)
    priced = not cost.missing_prices(region, [f"machine:{catalog.n1_standard_for(1)}"])
    return Offer("gce", zone, T4_SHAPE, cost.t4_offer_usd_per_hour(region, spot=False),
                 cost.t4_offer_usd_per_hour(region, spot=True), catalog.GCE_PRICE_LIST if priced else "-")
