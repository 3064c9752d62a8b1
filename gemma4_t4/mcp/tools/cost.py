"""The `cost` tool: what the stack costs at catalog list prices (`gemma4-t4 cost`)."""

import dataclasses

from mcp.server.mcpserver import Context

from ... import clouds
from ...core import cost as core_cost
from ...core.ops import SCHEMA_VERSION
from ..calls import in_thread, versioned, workspace
from ..effects import READS_HERE_AND_HUB
from ..inputs import Overrides, Stack

NAME = "cost"
COMMAND = "cost"
EFFECT = READS_HERE_AND_HUB


@dataclasses.dataclass
class CostResult(core_cost.CostEstimate):
    schema_version: int = SCHEMA_VERSION


async def cost(ctx: Context, stack: Stack, config: Overrides | None = None) -> CostResult:
    """What the stack costs at catalog list prices: per hour serving, per month with its VM
    stopped (GCE: the disks), per month after `pulumi destroy`."""
    bound = workspace(ctx)
    return versioned(CostResult, await in_thread(
        lambda: clouds.estimate(bound.stack(stack), config or [], bound.project_dir)))
