"""Where a Tesla T4 can be had, and its hourly list price: every GCE zone the catalog knows sells one (an
n1-standard-2 with one T4, on demand and Spot) and every SageMaker region the catalog has a price for
(ml.g4dn.xlarge), offline, cheapest first. What `gemma4-t4 zones` prints."""

from __future__ import annotations

from dataclasses import dataclass

from .. import catalog

CLOUDS = ("gce", "sagemaker")
GCE_SHAPE = f"{catalog.n1_standard_for(1)}+T4"
SAGEMAKER_INSTANCE = catalog.sagemaker_t4_instance_for(1)


@dataclass(frozen=True)
class Offer:
    cloud: str
    location: str  # a GCE zone, a SageMaker region
    instance: str
    usd_per_hour: float | None  # on demand; None: the catalog has no list price there
    spot_usd_per_hour: float | None  # None: no Spot price (SageMaker endpoints have no Spot capacity)
    source: str


@dataclass(frozen=True)
class Offers:
    """Every offer, cheapest first (the `zones` command's --json document and MCP result)."""
    offers: list[Offer]


def _sum(*prices: catalog.Price | None) -> float | None:
    if any(price is None for price in prices):
        return None
    return round(sum(price.usd_per_hour for price in prices if price is not None), 5)


def _gce(zone: str) -> Offer:
    prices = catalog.GCE_PRICES.get(catalog.region_of(zone), {})
    machine, gpu = f"machine:{catalog.n1_standard_for(1)}", "gpu:nvidia-tesla-t4"
    return Offer("gce", zone, GCE_SHAPE, _sum(prices.get(machine), prices.get(gpu)),
                 _sum(prices.get(catalog.spot_item(machine)), prices.get(catalog.spot_item(gpu))),
                 catalog.GCE_PRICE_LIST if machine in prices else "-")


def _sagemaker(region: str) -> Offer:
    price = catalog.SAGEMAKER_REGIONAL_PRICES[region].get(SAGEMAKER_INSTANCE)
    return Offer("sagemaker", region, SAGEMAKER_INSTANCE, None if price is None else price.usd_per_hour, None,
                 "-" if price is None else price.source)


def t4_offers(cloud: str | None = None) -> list[Offer]:
    """Every offer of CLOUD (both when None), cheapest first; those without a price last."""
    offers = []
    if cloud in (None, "gce"):
        offers += [_gce(zone) for zone in catalog.GCE_T4_ZONES]
    if cloud in (None, "sagemaker"):
        offers += [_sagemaker(region) for region in catalog.SAGEMAKER_REGIONAL_PRICES]
    return sorted(offers, key=lambda o: (o.usd_per_hour is None, o.usd_per_hour or 0.0, o.cloud, o.location))
