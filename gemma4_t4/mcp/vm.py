"""What the stop and start tools share: one VM's change of state, only the stack's own VM (refused
before any Compute API call), with the VM's states as progress."""

import dataclasses
from typing import Annotated

from mcp.server.mcpserver import Context
from pydantic import Field

from ..core.lifecycle import Action
from ..core.lifecycle import LifecycleResult as CoreResult
from ..core.ops import SCHEMA_VERSION
from .calls import in_thread, progress, versioned, workspace

VM_WHERE = ("with stack: the stack's own VM, to confirm it (instance, zone and project are checked against "
            "the stack's outputs; anything else is refused)")
VmPart = Annotated[str | None, Field(description=VM_WHERE)]


@dataclasses.dataclass
class LifecycleResult(CoreResult):
    schema_version: int = SCHEMA_VERSION


async def change(ctx: Context, action: Action, stack: str | None,
                 instance: str | None, zone: str | None, project: str | None,
                 timeout_s: float, interval_s: float) -> LifecycleResult:
    report = progress(ctx, timeout_s)
    bound = workspace(ctx)

    def run() -> CoreResult:
        machine = bound.vm(stack, instance, zone, project)  # refused here, before any call to the cloud's API
        return machine.act(action, timeout_s=timeout_s, interval_s=interval_s,
                           on_tick=lambda elapsed, info: report(elapsed, " ".join(f"{v}" for v in info.values())))

    return versioned(LifecycleResult, await in_thread(run))
