"""The README a user starts from, and the docs/ pages the rest moved to: the README's figures are
`gemma4-t4 cost`'s, the config reference is the schema's, and no page uses the project's own words."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import docs_examples
import pytest
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


def test_the_pages_examples_are_found_both_kinds():
    """What the test below runs is read from the pages: a change to how they are written cannot leave it nothing."""
    found = docs_examples.examples()
    assert {example.page for example in found} >= {"README.md", "docs/library.md"}
    assert {example.runner for example in found} == {docs_examples.PROGRAM, docs_examples.UNIT_TEST}


@pytest.mark.parametrize("example", docs_examples.examples(), ids=lambda example: example.id)
def test_every_python_example_of_the_pages_runs_as_written_on_the_locked_versions(example, tmp_path):
    """On the versions requirements.lock holds (this checkout's environment); tests/install/test_wheel.py runs the
    same on the lowest versions pyproject.toml allows."""
    done = docs_examples.run(example, sys.executable, tmp_path / "example")
    assert docs_examples.ran(done), f"{example.id}:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"


def test_no_page_names_a_placeholder_and_each_release_it_names_is_this_version():
    """`pulumi package add` lines name a clone's path or GEMMA4_T4_REPOSITORY_URL (docs/library.md), never a
    placeholder owner, and the release tag they name is this version's."""
    import tomllib

    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    pages = {"README.md": README, **{f"docs/{name}": text for name, text in DOCS.items()}}
    for path in ("provider/PulumiPlugin.yaml", "examples/yaml/Pulumi.yaml", "examples/python/__main__.py"):
        pages[path] = (REPO / path).read_text()
    for name, text in pages.items():
        assert not re.search(r"<owner>|github\.com/OWNER|\bYOUR_ORG\b", text), name
        assert set(re.findall(r"provider@v([0-9][0-9.]*[0-9])", text)) <= {version}, name
    assert "GEMMA4_T4_REPOSITORY_URL" in DOCS["library.md"]


def test_the_changelogs_import_table_names_modules_that_import_now_and_did_then():
    """Each row of the upgrade note's "Imports that moved": the 0.4.0 module imports, and a 0.3.0 module that is not
    also a 0.4.0 one no longer does (a program that still imports it fails, as the note says)."""
    import importlib
    import importlib.util

    changelog = (REPO / "CHANGELOG.md").read_text()
    table = changelog.split("#### Imports that moved", 1)[1].split("\n####", 1)[0]
    rows = [line.split("|")[1:3] for line in table.splitlines() if line.startswith("| `")]
    assert len(rows) >= 10

    def modules(cell: str) -> list[str]:
        return [name for name in re.findall(r"`(gemma4_t4(?:\.\w+)+)`", cell)
                if name.rsplit(".", 1)[-1][:1].islower() or "." not in name]

    def found(name: str) -> bool:
        try:
            return importlib.util.find_spec(name) is not None
        except ModuleNotFoundError:  # its package is gone too
            return False

    for old, new in rows:
        now = modules(new)
        for name in now:
            importlib.import_module(name)
        if ":" in old:  # names that moved out of a module that stays
            continue
        for name in modules(old):
            assert name in now or not found(name), f"{name} still imports"
