"""The `zones` tool: where a T4 can be had, from the catalog (`gemma4-t4 zones`)."""

import dataclasses
from typing import Annotated, Any

from mcp.server.mcpserver.exceptions import ToolError
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


def _registered_clouds(schema: dict[str, Any]) -> None:
    """`cloud`'s enum: the clouds registered when the server is built (a Literal would freeze those registered
    when this module was imported), as the CLI's --cloud choices are read when its parser is built."""
    for branch in schema.get("anyOf", [schema]):
        if branch.get("type") == "string":
            branch["enum"] = list(clouds.CLOUDS)


async def zones(cloud: Annotated[str | None, Field(description="only this cloud (default: every one)",
                                                   json_schema_extra=_registered_clouds)] = None,
                ) -> ZonesResult:
    """Where a Tesla T4 can be had and its hourly list price, cheapest first, from the catalog (no cloud
    asked): each GCE zone selling T4s (n1-standard-2 + one T4, on demand and Spot; disks on top) and each
    SageMaker region with a recorded ml.g4dn.xlarge price. A null price is unknown, not free."""
    if cloud is not None and cloud not in clouds.CLOUDS:
        raise ToolError(f"cloud {cloud!r} is not one of {', '.join(clouds.CLOUDS)}")
    return versioned(ZonesResult, offers.Offers(clouds.t4_offers(cloud)))
