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
from typing import Any, Protocol


class Within(Protocol):
    """A cloud's own part of a region's row (e.g. the places inside the region that sell the accelerator), opaque
    to the core but for what it prints."""

    def place(self) -> str:
        """Where in the region the stack would go, in words ("" for nowhere finer than the region)."""

    def as_json(self) -> dict[str, Any]:
        """Its entries in the row's --json document."""


@dataclass(frozen=True)
class RegionRow:
    region: str
    ok: bool
    detail: str
    limit: float | None = None  # the regional quota (None: none reported)
    in_use: float | None = None
    within: Within | None = None  # the cloud's own part (None: it has nothing finer than a region)

    @property
    def place(self) -> str:
        """Where in the region the stack would go, as the cloud says it ("" for the region itself)."""
        return self.within.place() if self.within is not None else ""

    @property
    def where(self) -> str:
        """The region, and where inside it if the cloud says."""
        return f"{self.region} ({self.place})" if self.place else self.region

    def as_json(self) -> dict[str, Any]:
        own = self.within.as_json() if self.within is not None else {}
        return {"region": self.region, "ok": self.ok, "detail": self.detail, "limit": self.limit,
                "in_use": self.in_use, **own}


@dataclass(frozen=True)
class RegionsReport:
    cloud: str
    needed: str  # what each region must hold, in words
    rows: list[RegionRow]
    first: RegionRow | None
    config_lines: list[str] = field(default_factory=list)  # what moves the stack to `first`
    notes: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        """The `preflight --all-regions --json` document (docs/json.md)."""
        return {"cloud": self.cloud, "needed": self.needed, "rows": [row.as_json() for row in self.rows],
                "first": self.first.as_json() if self.first is not None else None,
                "config_lines": self.config_lines, "notes": self.notes}


def ordered(rows: Iterable[RegionRow], current: str) -> list[RegionRow]:
    """The stack's own region first, then the others by name; the first that works is the pick."""
    return sorted(rows, key=lambda row: (row.region != current, row.region))
