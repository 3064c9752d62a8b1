"""The `stop` tool: stop a GCE stack's VM, keeping its disks (`gemma4-t4 stop`)."""

from mcp.server.mcpserver import Context

from ..effects import Effect
from ..inputs import Interval, Seconds, StackName
from ..vm import LifecycleResult, VmPart, change

NAME = "stop"
COMMAND = "stop"
EFFECT = Effect("stops the VM: serving ends (the disks stay)")


async def stop(ctx: Context, stack: StackName = None, instance: VmPart = None, zone: VmPart = None,
              project: VmPart = None, timeout_s: Seconds = 600, interval_s: Interval = 5) -> LifecycleResult:
    """Stop a GCE stack's VM without destroying it and wait until it has stopped: the machine and
    GPU stop billing, both disks stay (and bill: listed). Needs the user's approval: serving stops.
    Only the stack's own VM. A SageMaker endpoint cannot be stopped, only deleted (`pulumi destroy`)."""
    return await change(ctx, "stop", stack, instance, zone, project, timeout_s, interval_s)
