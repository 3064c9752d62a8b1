"""The `stop` tool: stop a GCE stack's VM, keeping its disks (`gemma4-t4 stop`)."""

from collections.abc import Awaitable, Callable

from ..effects import Effect
from ..vm import LifecycleResult, vm_tool

NAME = "stop"
COMMAND = "stop"
EFFECT = Effect("stops the VM: serving ends (the disks stay)")
DOC = """Stop a GCE stack's VM without destroying it and wait until it has stopped: the machine and
    GPU stop billing, both disks stay (and bill: listed). Needs the user's approval: serving stops.
    Only the stack's own VM. A SageMaker endpoint cannot be stopped, only deleted (`pulumi destroy`)."""


def build() -> Callable[..., Awaitable[LifecycleResult]]:
    """The tool, its inputs that name a VM from the clouds registered now (gemma4_t4.mcp.vm.vm_tool)."""
    return vm_tool("stop", DOC)
