"""The `fit` tool: the Turing clamp's kernels compiled for sm_75 (`gemma4-t4 fit`)."""

from typing import Annotated, Any

from mcp.server.mcpserver import Context
from pydantic import Field
from typing_extensions import TypedDict

from ...core import fit as clamp
from ...core.ops import SCHEMA_VERSION
from ..calls import in_thread, workspace
from ..effects import READS_HERE

NAME = "fit"
COMMAND = "fit"
EFFECT = READS_HERE


class FitReport(TypedDict):
    schema_version: int
    ok: bool  # every vLLM checked fits sm_75 (and, with strict, spills nothing)
    reports: list[dict[str, Any]]  # turing_clamp fit's report per pinned vLLM


async def fit(ctx: Context, strict: Annotated[bool, Field(description="also fail on any register spill")] = False,
              ) -> FitReport:
    """Compile every Gemma 4 attention kernel the Turing clamp launches for sm_75 (no GPU): shared
    memory, registers and spills against the T4's 64 KiB, on each pinned vLLM (minutes)."""
    project_dir = workspace(ctx).project_dir
    reports = await in_thread(lambda: clamp.run(strict, project_dir))
    return FitReport(schema_version=SCHEMA_VERSION, ok=all(clamp.ok(r, strict) for r in reports), reports=reports)
