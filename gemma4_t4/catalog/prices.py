"""Prices: list prices, each with where and when it was read. Estimates for planning; the bill is
the truth."""

from __future__ import annotations

from dataclasses import dataclass

HOURS_PER_MONTH = 730


@dataclass(frozen=True)
class Price:
    usd_per_hour: float  # for per-GB-month items: USD per GB-month
    source: str
