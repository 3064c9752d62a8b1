"""What the stop and start tools share: one VM's change of state, only the stack's own VM (refused
before any Compute API call), with the VM's states as progress. Their inputs that name a VM are the names the
registered clouds give one (Cloud.vm_names: instance, zone and project on one), read when the server is built,
as the CLI's options are when its parser is."""

import dataclasses
import inspect
from collections.abc import Awaitable, Callable, Mapping
from typing import Annotated

from mcp.server.mcpserver import Context
from pydantic import Field

from .. import clouds
from ..core.lifecycle import Action
from ..core.lifecycle import LifecycleResult as CoreResult
from ..core.ops import SCHEMA_VERSION
from .calls import in_thread, progress, versioned, workspace
from .inputs import Interval, Seconds, StackName

VM_WHERE = ("with stack: the stack's own VM, to confirm it (checked against the stack's outputs; anything else is "
            "refused)")


@dataclasses.dataclass
class LifecycleResult(CoreResult):
    schema_version: int = SCHEMA_VERSION


async def change(ctx: Context, action: Action, stack: str | None, names: Mapping[str, str | None],
                 timeout_s: float, interval_s: float) -> LifecycleResult:
    report = progress(ctx, timeout_s)
    bound = workspace(ctx)

    def run() -> CoreResult:
        machine = bound.vm(stack, names)  # refused here, before any call to the cloud's API
        return machine.act(action, timeout_s=timeout_s, interval_s=interval_s,
                           on_tick=lambda elapsed, info: report(elapsed, " ".join(f"{v}" for v in info.values())))

    return versioned(LifecycleResult, await in_thread(run))


def vm_tool(action: Action, doc: str) -> Callable[..., Awaitable[LifecycleResult]]:
    """The ACTION tool as the server is built: stack, each name the registered clouds give a VM, then the waits."""

    async def tool(ctx: Context, stack: StackName = None, timeout_s: Seconds = 600, interval_s: Interval = 5,
                   **names: str | None) -> LifecycleResult:
        return await change(ctx, action, stack, names, timeout_s, interval_s)

    ctx, stack, timeout_s, interval_s, _ = inspect.signature(tool).parameters.values()
    named = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None,
                               annotation=Annotated[str | None, Field(description=f"{help_}, {VM_WHERE}")])
             for name, help_ in clouds.vm_names().items()]
    keyword = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in (stack, *named, timeout_s, interval_s)]
    tool.__signature__ = inspect.signature(tool).replace(parameters=[ctx, *keyword])  # type: ignore[attr-defined]
    tool.__name__ = tool.__qualname__ = action
    tool.__doc__ = inspect.cleandoc(doc)
    return tool
