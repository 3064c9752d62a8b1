"""`gemma4-t4 preflight STACK --all-regions`: where would the stack fit, if not where it is?

Per region: the quota and what is in use, and where the cloud has them, the zones that sell the
accelerator; each cloud fills a RegionsReport (gemma4_t4/clouds/NAME/capacity.py). The stack's own
region comes first, then the others by name; the first that would work is named with the exact
`pulumi config set` lines that move the stack there.

No API says whether a zone has accelerators free right now: a stockout shows only when the server is
created. The report says which places sell them and where the quota allows them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field


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


def ordered(rows: Iterable[RegionRow], current: str) -> list[RegionRow]:
    """The stack's own region first, then the others by name; the first that works is the pick."""
    return sorted(rows, key=lambda row: (row.region != current, row.region))
