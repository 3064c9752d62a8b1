"""The README a user starts from, and the docs/ pages the rest moved to: the README's figures are
`gemma4-t4 cost`'s, the config reference is the schema's, and no page uses the project's own words."""

from __future__ import annotations

import json
import re
import subprocess
import sys

from conftest import REPO

from gemma4_t4 import generate, project_file
from gemma4_t4.cli.cost import README_STACKS, readme_table

README = (REPO / "README.md").read_text()
DOCS = {path.name: path.read_text() for path in (REPO / "docs").glob("*.md")}


def test_the_readmes_cost_table_is_the_cost_commands():
    assert generate.with_block(README, "cost table", readme_table()) == README, "run `make generate`"
    block = README.split("<!-- generated: cost table", 1)[1].split("-->", 1)[1].split("<!-- end generated", 1)[0]
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]] for line in block.strip().splitlines()}
    for column, stack in enumerate(README_STACKS):
        result = subprocess.run([sys.executable, "-m", "gemma4_t4", "cost", stack, "--json"], capture_output=True,
                                text=True, cwd=REPO)
        cost = json.loads(result.stdout)
        assert rows["serving, per hour"][column] == f"${cost['running_usd_per_hour']:,.4f}/h"
        assert rows["after `pulumi destroy`, per month"][column] == f"${cost['after_destroy_usd_per_month']:,.2f}/month"
        stopped = rows["stopped (`gemma4-t4 stop -s STACK`), per month"][column]
        assert stopped == (f"${cost['stopped_usd_per_month']:,.2f}/month" if cost["stoppable"]
                           else "cannot stop, only delete")


def test_the_readme_is_short_and_links_what_moved():
    assert len(README.splitlines()) < 200
    for heading in ("How the guest is set up", "The locked guest environment", "The boot test", "The benchmark",
                    "MCP server", "Stop and start without destroy", "What is proven here",
                    "Scaling the GCE stack out", "How it is built", "Unit tests of your program", "The stack config", "Set-up on a fresh machine"):
        assert any(f"# {heading}" in page for page in DOCS.values()), heading
    linked = set(re.findall(r"\]\((docs/[^)#]+)", README))
    assert {"docs/gce-guest.md", "docs/sagemaker-account.md", "docs/library.md"} <= linked
    missing = [link for link in linked if not (REPO / link).exists()]
    assert missing == []


def test_the_config_reference_is_the_schemas():
    assert DOCS["config-reference.md"] == project_file.reference(), "run `make generate`"


def test_no_page_a_user_reads_uses_the_projects_own_words():
    for name, text in {"README.md": README, **DOCS}.items():
        assert not re.search(r"\bseeds?\b(?! questions)|seed \d{3}|\bissue \d+|<!-- issue", text, re.IGNORECASE), name
