"""The MCP tools, one module each, as gemma4_t4/cli has one module per command. Each tool module says:
NAME, the tool's name (and the function of that name, or a `build()` that makes it as the server is built);
COMMAND, the CLI command it is (tests/cli/test_mcp.py holds the two to the same
arguments, through gemma4_t4.mcp.cli_parity); EFFECT, what calling it does (its annotations and `_meta`:
gemma4_t4.mcp.effects); and the tool itself, the async function named NAME: a thin call into
gemma4_t4.core whose signature is the tool's input schema, whose return type its output schema (the
core's own types, with the CLI's --json `schema_version`) and whose docstring its description.
gemma4_t4.mcp.server registers every module listed in TOOLS, in this order."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from types import ModuleType
from typing import Any

from . import bench, bench_compare, cost, fit, logs, plan, preflight, query, start, status, stop, wait, zones

TOOLS: tuple[ModuleType, ...] = (plan, cost, zones, preflight, fit, status, wait, query, logs, bench,
                                 bench_compare, stop, start)


def function(tool: ModuleType) -> Callable[..., Any]:
    """The tool module's tool: its function named NAME, or what its `build()` makes when the server is built (a tool
    whose inputs come from the registered clouds: stop and start)."""
    found = tool.build() if hasattr(tool, "build") else getattr(tool, tool.NAME)
    assert inspect.iscoroutinefunction(found), f"{tool.__name__}: {tool.NAME} is the tool, an async function"
    return found
