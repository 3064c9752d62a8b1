"""What calling a tool does to the world, declared by each tool (gemma4_t4/mcp/tools) and told to the
client twice: as MCP's annotations (read-only, destructive, idempotent, open world) and in `_meta`, the
two questions an assistant asks before it calls: does it start a bill? does it change anything?
docs/mcp.md's table says the same; tests/cli/test_mcp.py holds both to what each tool does."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mcp_types import ToolAnnotations

# _meta keys: does calling the tool start a bill? does it change anything outside this process?
COSTS_MONEY = "gemma4-t4/costs-money"
CHANGES_STATE = "gemma4-t4/changes-state"


@dataclass(frozen=True)
class Effect:
    """What calling a tool does to the world. Every tool that changes something is destructive in MCP's
    sense (it may undo or overwrite what was there): stop ends serving, start bills again, bench loads
    the server and overwrites its report and charts, bench_compare overwrites its charts."""

    changes: str = ""  # what it changes, if anything (empty: it only reads)
    open_world: bool = True  # it talks to a cloud or a server (False: this machine only)
    idempotent: bool = True  # calling it twice does no more than once
    costs_money: bool = False  # it starts a bill

    def annotations(self) -> ToolAnnotations:
        if not self.changes:
            return ToolAnnotations(read_only_hint=True, destructive_hint=False, open_world_hint=self.open_world)
        return ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=self.idempotent,
                               open_world_hint=self.open_world)

    def meta(self) -> dict[str, Any]:
        return {COSTS_MONEY: self.costs_money, CHANGES_STATE: bool(self.changes)}


READS_HERE = Effect(open_world=False)  # reads this machine only (the project, the catalog, local files)
READS = Effect()  # reads a cloud or a server, changes nothing
# Reads this machine, and the Hugging Face Hub for a model the catalog does not know (its size, for the memory
# plan): open world. The MCP server asks the Hub anonymously (server.serve): an agent's `config` override naming
# another repository never carries the operator's HF token.
READS_HERE_AND_HUB = Effect()
