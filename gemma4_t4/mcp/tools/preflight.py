"""The `preflight` tool: the live quotas and offerings the stack needs (`gemma4-t4 preflight`)."""

from pathlib import Path
from typing import Annotated

from mcp.server.mcpserver import Context
from pydantic import Field
from typing_extensions import TypedDict

from ... import clouds
from ...checks import Check
from ...core.ops import SCHEMA_VERSION
from .. import scope
from ..calls import in_thread, workspace
from ..effects import READS
from ..inputs import Overrides, Stack

NAME = "preflight"
COMMAND = "preflight"
EFFECT = READS

Project = Annotated[str | None, Field(description="GCP project, only to confirm the stack file's gcp:project (the "
                                                  "project checked); refused if the stack file sets none or another")]


def _check_project(stack: str, overrides: list[str], project: str | None, project_dir: Path | None) -> None:
    """The project is the stack file's own: no override moves the checks to another (gcp:project=victim), and a
    `project` only confirms the stack file's gcp:project, which must set one."""
    moved = [o for o in overrides if o.split("=", 1)[0].strip() in ("gcp:project", "project")]
    if moved:
        raise scope.OutOfScope(f"{scope.REFUSED}config {moved[0]}: the tools check the stack's own project; set "
                               "gcp:project in the stack file (`pulumi config set gcp:project ...`) to change it")
    own = clouds.stack_config(stack, (), project_dir).get("gcp:project")
    if project and project != own:
        has = f"its gcp:project is {own}" if own else "its stack file sets no gcp:project to confirm it against"
        raise scope.OutOfScope(f"{scope.REFUSED}project {project} is not stack {stack}'s: {has}")


class PreflightReport(TypedDict):
    schema_version: int
    stack: str
    ok: bool
    checks: list[Check]


async def preflight(ctx: Context, stack: Stack, config: Overrides | None = None, project: Project = None,
              ) -> PreflightReport:
    """Can `pulumi up` work in this account? The live quotas and GPU offerings the stack needs,
    each with the exact fix. Uses the cloud credentials of the user running this server."""
    bound = workspace(ctx)
    project_dir = bound.project_dir

    def check() -> PreflightReport:
        name = bound.stack(stack)
        _check_project(name, config or [], project, project_dir)
        config_, result = clouds.plan_stack(name, config or [], project_dir)
        checks = clouds.preflight(stack, config_, result, clouds.Place(project))
        return PreflightReport(schema_version=SCHEMA_VERSION, stack=stack, ok=all(c.ok for c in checks),
                               checks=checks)

    return await in_thread(check)
