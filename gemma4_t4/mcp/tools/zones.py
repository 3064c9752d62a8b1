"""The `zones` tool: where a T4 can be had, from the catalog (`gemma4-t4 zones`)."""

import dataclasses
from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import Field

from ... import clouds
from ...core import offers
from ...core.ops import SCHEMA_VERSION
from ..calls import versioned
from ..effects import READS_HERE

NAME = "zones"
COMMAND = "zones"
EFFECT = READS_HERE


@dataclasses.dataclass(frozen=True)
class ZonesResult(offers.Offers):
    schema_version: int = SCHEMA_VERSION


if TYPE_CHECKING:
    CloudName = str
else:  # the schema's enum: the registered clouds' names, from the registry
    CloudName = Literal[tuple(clouds.CLOUDS)]


async def zones(cloud: Annotated[CloudName | None, Field(description="only this cloud (default: every one)")] = None,
                ) -> ZonesResult:
    """Where a Tesla T4 can be had and its hourly list price, cheapest first, from the catalog (no cloud
    asked): each GCE zone selling T4s (n1-standard-2 + one T4, on demand and Spot; disks on top) and each
    SageMaker region with a recorded ml.g4dn.xlarge price. A null price is unknown, not free."""
    return versioned(ZonesResult, offers.Offers(clouds.t4_offers(cloud)))
