"""The `preflight` tool: the live quotas and offerings the stack needs (`gemma4-t4 preflight`)."""

from typing import Annotated

from mcp.server.mcpserver import Context
from pydantic import Field
from typing_extensions import TypedDict

from ... import clouds
from ...core import preflight as core_preflight
from ...core.ops import SCHEMA_VERSION
from .. import scope
from ..calls import in_thread, workspace
from ..effects import READS
from ..inputs import Overrides, Stack

NAME = "preflight"
COMMAND = "preflight"
EFFECT = READS

Project = Annotated[str | None, Field(description="GCP project (default: gcp:project of the stack file; if it sets "
                                                  "one, only that one)")]


class PreflightReport(TypedDict):
    schema_version: int
    stack: str
    ok: bool
    checks: list[core_preflight.Check]


async def preflight(ctx: Context, stack: Stack, config: Overrides | None = None, project: Project = None,
              ) -> PreflightReport:
    """Can `pulumi up` work in this account? The live quotas and GPU offerings the stack needs,
    each with the exact fix. Uses the cloud credentials of the user running this server."""
    project_dir = workspace(ctx).project_dir

    def check() -> PreflightReport:
        config_, result = clouds.plan_stack(scope.stack_name(stack), config or [], project_dir)
        own = config_.get("gcp:project")
        if project and own and project != own:
            raise scope.OutOfScope(f"{scope.REFUSED}project {project} is not stack {stack}'s: its "
                                   f"gcp:project is {own}")
        checks = clouds.preflight(stack, config_, result, clouds.Place(project))
        return PreflightReport(schema_version=SCHEMA_VERSION, stack=stack, ok=all(c.ok for c in checks),
                               checks=checks)

    return await in_thread(check)
