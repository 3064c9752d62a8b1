"""The `status` tool: is the server serving, and what the cloud says of it (`gemma4-t4 status`)."""

import dataclasses

from mcp.server.mcpserver import Context

from ...core import ops
from ...core.ops import SCHEMA_VERSION
from ..calls import in_thread, versioned, workspace
from ..effects import READS
from ..inputs import Endpoint, Region, StackName, Url

NAME = "status"
COMMAND = "status"
EFFECT = READS


@dataclasses.dataclass
class StatusResult(ops.Status):
    schema_version: int = SCHEMA_VERSION


async def status(ctx: Context, url: Url = None, stack: StackName = None, endpoint: Endpoint = None,
              region: Region = None) -> StatusResult:
    """Is the server serving, which model at what max length, and what the cloud says of it
    (VRAM on GCE, the endpoint status on SageMaker)."""
    return versioned(StatusResult, await in_thread(
        workspace(ctx).with_target((url, stack, endpoint, region), ops.status)))
