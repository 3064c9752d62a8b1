"""What the tools are bound to: where the project lives, the one working folder, the URLs allowed
(--allow-url), and, for the tests, stand-ins for the clouds' APIs. Every place a tool names (a url, a
stack, its endpoint or VM, a file) is resolved here, inside that scope (gemma4_t4.mcp.scope), before
anything is contacted."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from mcp.server.mcpserver.exceptions import ToolError

from .. import clouds
from ..core import ops
from ..core.lifecycle import Machine
from ..core.targets import Target, TargetError
from . import scope

T = TypeVar("T")

# Where a target-taking tool's server is: (url, stack, endpoint, region), as the tool was given them.
Where = tuple[str | None, str | None, str | None, str | None]


class Workspace:
    """The server's scope, and the targets, VMs and paths a tool call resolves inside it."""

    def __init__(self, project_dir: Path | None = None, workdir: Path | None = None,
                 allow_urls: Sequence[str] = (), endpoint_url: str | None = None,
                 compute_endpoint: str | None = None):
        self.project_dir = project_dir
        self.workdir = (workdir or Path.cwd()).resolve()
        self.urls = scope.Urls(tuple(allow_urls))
        self.endpoint_url = endpoint_url  # a stand-in for the cloud's serving API (clouds.stack_target)
        self.compute_endpoint = compute_endpoint

    def outputs(self, stack: str) -> dict[str, Any]:
        return ops.stack_outputs(scope.stack_name(stack), cwd=self.project_dir)

    def target(self, url: str | None, stack: str | None, endpoint: str | None, region: str | None) -> Target:
        if stack and not url:
            outputs = self.outputs(stack)
            scope.check_owned(stack, outputs, {"endpoint": endpoint, "region": region})
            return clouds.stack_target(stack, outputs, self.endpoint_url, self.compute_endpoint)
        if (endpoint or region) and not url:
            raise scope.needs_stack({"endpoint": endpoint, "region": region}, "a stack's own endpoint")
        if url and not (endpoint or region):
            self.urls.check(url)
        # A url (checked), or resolve_target's refusal of several places or none.
        return clouds.resolve_target(url=url, stack=stack, endpoint=endpoint, region=region)

    def with_target(self, where: Where, use: Callable[[Target], T]) -> Callable[[], T]:
        """A call (for a worker thread) that resolves WHERE, uses its target, and closes it."""

        def call() -> T:
            target = self.target(*where)
            try:
                return use(target)
            finally:
                target.close()

        return call

    def vm(self, stack: str | None, instance: str | None, zone: str | None, project: str | None) -> Machine:
        asked = {"instance": instance, "zone": zone, "project": project}
        if not stack:
            if any(asked.values()):
                raise scope.needs_stack(asked, "a stack's own VM")
            raise TargetError("say which VM: stack (a deployed GCE stack)")
        outputs = self.outputs(stack)
        scope.check_owned(stack, outputs, asked)
        return clouds.vm_from_stack(stack, outputs=outputs, api_endpoint=self.compute_endpoint)

    def path(self, given: str, what: str) -> Path:
        try:
            return scope.inside(self.workdir, given, what)
        except scope.OutOfScope as err:
            raise ToolError(str(err)) from None
