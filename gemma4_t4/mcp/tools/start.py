"""The `start` tool: start a stopped GCE stack's VM (`gemma4-t4 start`)."""

from collections.abc import Awaitable, Callable

from ..effects import Effect
from ..vm import LifecycleResult, vm_tool

NAME = "start"
COMMAND = "start"
EFFECT = Effect("starts the VM: the machine and GPU bill again", costs_money=True)
DOC = """Start a stopped GCE stack's VM and wait until it runs; the machine and GPU bill again
    (the price per hour is in the result). Needs the user's approval. Only the stack's own VM.
    The guest comes back by itself; then call wait until vLLM is healthy."""


def build() -> Callable[..., Awaitable[LifecycleResult]]:
    """The tool, its inputs that name a VM from the clouds registered now (gemma4_t4.mcp.vm.vm_tool)."""
    return vm_tool("start", DOC)
