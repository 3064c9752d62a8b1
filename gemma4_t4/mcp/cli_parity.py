"""How the MCP tools match the CLI's operator commands: the tool each command is (each registered tool
module's COMMAND), the options a tool names otherwise, and what no tool offers, with why.
tests/cli/test_mcp.py holds the CLI's parser and the registered tools to these tables, names and types both,
so the two front ends cannot drift apart."""

from __future__ import annotations

from .tools import TOOLS

# The tool of each CLI command ("command action" where the command has actions), as each tool module says.
TOOL_OF_COMMAND = {tool.COMMAND: tool.NAME for tool in TOOLS}

# Commands with no tool, and why.
NO_TOOL = {"mcp": "it is the server that offers the tools",
           "up": "it spends money after asking a person (a terminal's yes, or --yes), and runs for up to an hour: "
                 "the CLI's, not an agent's; the tools plan, check and cost a stack (plan, preflight, cost)",
           "down": "it destroys a stack after asking a person: the CLI's, as `up` is"}

# A CLI option's name (its argparse dest) -> the tool's argument, where the tool names it otherwise.
RENAMED = {
    "stack_positional": "stack",  # `plan gce-t4` and `plan --stack gce-t4` are the one argument
    "timeout": "timeout_s",  # a JSON number carries no unit: the name does
    "interval": "interval_s",
    "plot": "plot_dir",
}

# CLI options no tool takes, and why (the same reason for every command that has the option).
NOT_OFFERED = {
    "json": "every tool result is the structured document --json prints, schema_version and all",
    "project_dir": "one Pulumi project per server: `gemma4-t4 mcp --project-dir DIR`",
    "follow": "a tool call returns once; a followed log never ends",
    "stream": "query always streams (the pieces as progress notifications); the result is the whole reply",
    "user_data": "plan's result already holds the guest's user-data (the VM's metadata); writing it to a file "
                 "is the CLI's",
    "all_regions": "not offered yet: every region's quotas and offers (`gemma4-t4 preflight STACK --all-regions`)",
    "regions": "goes with all_regions",
}
