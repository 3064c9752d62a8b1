"""Where a Tesla T4 can be had, and its hourly list price, offline, cheapest first: each cloud lists its own
(Cloud.offers: gemma4_t4/clouds/NAME/capacity.py). What `gemma4-t4 zones` prints."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from .. import catalog


@dataclass(frozen=True)
class Offer:
    cloud: str
    location: str  # where the cloud sells it: a zone or a region
    instance: str
    usd_per_hour: float | None  # on demand; None: the catalog has no list price there
    spot_usd_per_hour: float | None  # None: no Spot price (or no Spot capacity)
    source: str


@dataclass(frozen=True)
class Offers:
    """Every offer, cheapest first (the `zones` command's --json document and MCP result)."""
    offers: list[Offer]


def price_sum(*prices: catalog.Price | None) -> float | None:
    """The sum of the list prices; None where one is unknown."""
    if any(price is None for price in prices):
        return None
    return round(sum(price.usd_per_hour for price in prices if price is not None), 5)


def cheapest_first(offers: Iterable[Offer]) -> list[Offer]:
    """Cheapest first; those without a price last."""
    return sorted(offers, key=lambda o: (o.usd_per_hour is None, o.usd_per_hour or 0.0, o.cloud, o.location))
