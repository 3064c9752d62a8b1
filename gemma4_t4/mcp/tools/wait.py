"""The `wait` tool: poll /health until healthy, with progress (`gemma4-t4 wait`)."""

import dataclasses
from typing import Any

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError

from ...core import ops
from ...core.ops import SCHEMA_VERSION
from ..calls import in_thread, progress, versioned, workspace
from ..effects import READS
from ..inputs import Endpoint, Interval, Region, Seconds, StackName, Url

NAME = "wait"
COMMAND = "wait"
EFFECT = READS


@dataclasses.dataclass
class WaitResult(ops.WaitResult):
    schema_version: int = SCHEMA_VERSION


async def wait(ctx: Context, url: Url = None, stack: StackName = None, endpoint: Endpoint = None,
              region: Region = None, timeout_s: Seconds = ops.WAIT_TIMEOUT_S, interval_s: Interval = 15) -> WaitResult:
    """Poll /health until healthy, reporting elapsed time, the GCE guest's boot phase and VRAM as
    progress; an error saying what was seen if the server dies or the time runs out (a new GCE VM's
    first boot takes tens of minutes: docs/gce-guest.md, "First-boot timings")."""
    report = progress(ctx, timeout_s)

    def tick(elapsed: float, info: dict[str, Any]) -> None:
        report(elapsed, "waiting " + "  ".join(f"{k} {v}" for k, v in info.items()))

    result = await in_thread(workspace(ctx).with_target(
        (url, stack, endpoint, region),
        lambda target: ops.wait(target, timeout_s=timeout_s, interval_s=interval_s, on_tick=tick)))
    if not result.healthy:
        raise ToolError(ops.wait_failure(result, timeout_s))
    return versioned(WaitResult, result)
