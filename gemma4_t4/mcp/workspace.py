"""What the tools are bound to: where the project lives, the one working folder, the URLs allowed
(--allow-url), and, for the tests, stand-ins for the clouds' APIs. Every place a tool names (a url, a
stack, its endpoint or VM, a file) is resolved here, inside that scope (gemma4_t4.mcp.scope), before
anything is contacted."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from mcp.server.mcpserver.exceptions import ToolError

from .. import clouds
from ..core import ops
from ..core.lifecycle import Machine
from ..core.targets import Target
from ..errors import UsageError
from . import scope

T = TypeVar("T")

# Where a target-taking tool's server is: (url, stack, endpoint, region), as the tool was given them.
Where = tuple[str | None, str | None, str | None, str | None]


def default_workdir() -> Path:
    """The tools' own folder when the server is given none: desktop MCP clients start servers in `/` or the home
    folder, where "the working directory" would be the whole disk. $XDG_DATA_HOME/gemma4-t4/mcp (the XDG Base
    Directory specification's user data folder; ~/.local/share when unset), made if missing."""
    data = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    folder = Path(data) / "gemma4-t4" / "mcp"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def refuse_broad_workdir(workdir: Path) -> None:
    """A working folder that holds the user's whole home (or the whole disk) is no scope: ValueError with why."""
    root, home = workdir.resolve(), Path.home().resolve()
    whole_disk = root == Path(root.anchor)
    if whole_disk or home.is_relative_to(root):
        raise ValueError(f"--workdir {workdir} is {root}, which holds {'the whole disk' if whole_disk else 'your home'}"
                         ": give the tools a folder of their own (the default is "
                         f"{os.environ.get('XDG_DATA_HOME') or '~/.local/share'}/gemma4-t4/mcp)")


class Workspace:
    """The server's scope, and the targets, VMs and paths a tool call resolves inside it."""

    def __init__(self, project_dir: Path | None = None, workdir: Path | None = None,
                 allow_urls: Sequence[str] = (), endpoint_url: str | None = None,
                 compute_endpoint: str | None = None, stacks: Sequence[str] = ()):
        self.project_dir = project_dir
        self.workdir = (workdir or default_workdir()).resolve()
        self.urls = scope.Urls(tuple(allow_urls))
        self.stacks = tuple(stacks)  # --stack: the only stacks the tools act on (empty: any of the project's)
        self.endpoint_url = endpoint_url  # a stand-in for the cloud's serving API (clouds.stack_target)
        self.compute_endpoint = compute_endpoint

    def outputs(self, stack: str, instead: str = "url (a server's URL) instead of stack") -> dict[str, Any]:
        """The stack's outputs; INSTEAD: the tool's arguments that name its target without a stack, for the line that
        says the Pulumi CLI is missing (in the tools' words, not the CLI's flags)."""
        return ops.stack_outputs(self.stack(stack), cwd=self.project_dir, instead=instead)

    def stack(self, name: str) -> str:
        """NAME, if the tools may act on it (scope.stack_name)."""
        return scope.stack_name(name, self.stacks)

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

    def vm(self, stack: str | None, asked: Mapping[str, str | None]) -> Machine:
        """The stack's own VM; ASKED: the names a cloud gives a VM (Cloud.vm_names), each to confirm the stack's."""
        if not stack:
            if any(asked.values()):
                raise scope.needs_stack(asked, "a stack's own VM")
            raise UsageError("say which VM: stack (a deployed GCE stack)")
        outputs = self.outputs(stack, instead="")  # the tools name a VM by its stack alone
        scope.check_owned(stack, outputs, asked)
        return clouds.vm_from_stack(stack, outputs=outputs, api_endpoint=self.compute_endpoint)

    def path(self, given: str, what: str) -> Path:
        try:
            return scope.inside(self.workdir, given, what)
        except scope.OutOfScope as err:
            raise ToolError(str(err)) from None

    def report_to_read(self, given: str, what: str) -> Path:
        return self._checked(given, what, scope.report_to_read)

    def new_report(self, given: str, what: str) -> Path:
        return self._checked(given, what, scope.new_report)

    def chart_folder(self, given: str, what: str, charts: Sequence[str]) -> Path:
        return self._checked(given, what, lambda path, given, what: scope.chart_folder(path, given, what, charts))

    def _checked(self, given: str, what: str, check: Callable[[Path, str, str], Path]) -> Path:
        path = self.path(given, what)
        try:
            return check(path, given, what)
        except scope.OutOfScope as err:
            raise ToolError(str(err)) from None
