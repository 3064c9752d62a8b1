"""The `start` tool: start a stopped GCE stack's VM (`gemma4-t4 start`)."""

from mcp.server.mcpserver import Context

from ..effects import Effect
from ..inputs import Interval, Seconds, StackName
from ..vm import LifecycleResult, VmPart, change

NAME = "start"
COMMAND = "start"
EFFECT = Effect("starts the VM: the machine and GPU bill again", costs_money=True)


async def start(ctx: Context, stack: StackName = None, instance: VmPart = None, zone: VmPart = None,
              project: VmPart = None, timeout_s: Seconds = 600, interval_s: Interval = 5) -> LifecycleResult:
    """Start a stopped GCE stack's VM and wait until it runs; the machine and GPU bill again
    (the price per hour is in the result). Needs the user's approval. Only the stack's own VM.
    The guest comes back by itself; then call wait until vLLM is healthy."""
    return await change(ctx, "start", stack, instance, zone, project, timeout_s, interval_s)
