"""The `plan` tool: the stack's program run offline under mocks (`gemma4-t4 plan`)."""

from typing import Any

from mcp.server.mcpserver import Context

from ... import clouds
from ...core.ops import SCHEMA_VERSION
from ..calls import in_thread, workspace
from ..effects import READS_HERE_AND_HUB
from ..inputs import Overrides, Stack

NAME = "plan"
COMMAND = "plan"
EFFECT = READS_HERE_AND_HUB


async def plan(ctx: Context, stack: Stack, config: Overrides | None = None) -> dict[str, Any]:
    """The stack's real Pulumi program, run offline under mocks: every resource with its inputs,
    the outputs and the cost per hour. A bad config is refused with the key and the fix."""
    bound = workspace(ctx)

    def offline() -> dict[str, Any]:
        result = clouds.plan_stack(bound.stack(stack), config or [], bound.project_dir)[1]
        return {"schema_version": SCHEMA_VERSION, **result.as_json()}

    return await in_thread(offline)
