"""How a tool runs the core: the core is synchronous, so each call runs in a worker thread; its failures
become tool errors with the CLI's own messages (core.failures), and its progress callbacks come back to
the client as MCP progress notifications."""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import Callable
from typing import Any, TypeVar, cast

import anyio
import anyio.from_thread
import anyio.to_thread
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError

from .. import clouds
from ..core.untrusted import defang, defang_all
from .workspace import Workspace

T = TypeVar("T")
D = TypeVar("D")


def workspace(ctx: Context) -> Workspace:
    """The scope the server was started with (its lifespan's value: gemma4_t4.mcp.server.build)."""
    return cast(Workspace, ctx.request_context.lifespan_context)


async def in_thread(fn: Callable[[], T]) -> T:
    """Run core code in a worker thread; its failures become tool errors with the CLI's messages. What reaches the
    agent, result or error, is defanged (core.untrusted): a model id, a server's error text, a model's answer or a
    log line carries no control or bidirectional character, only its escape."""
    try:
        return cast(T, defang_all(await anyio.to_thread.run_sync(fn)))
    except Exception as err:  # the CLI's one boundary (core.failures): the same lines
        failure = clouds.explain(err)  # the registered clouds' clients' errors too
        if failure.bug:
            logging.getLogger(__name__).exception("tool failed")  # the server's stderr: the client's log
        raise ToolError(defang(failure.message)) from None


def progress(ctx: Context, total: float | None = None) -> Callable[[float, str], None]:
    """A callback for the worker thread that sends an MCP progress notification."""

    def report(done: float, message: str) -> None:
        # A progress message may be model text (query's pieces) or the VM's state: defanged like a result.
        anyio.from_thread.run(functools.partial(ctx.report_progress, done, total, defang(message)))

    return report


def versioned(kind: Callable[..., D], result: Any) -> D:
    """RESULT (a core dataclass) as KIND, its subclass that adds schema_version (the CLI's --json document)."""
    return kind(**{f.name: getattr(result, f.name) for f in dataclasses.fields(result)})
