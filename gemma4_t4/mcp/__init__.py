"""`gemma4-t4 mcp`: the operator commands as MCP tools (the official MCP Python SDK), for an
assistant in an editor. A front end like the CLI: every tool calls gemma4_t4.core, nothing else."""
