"""No invented cloud answers: every answer a stand-in gives in place of a cloud, a provider or a package
index carries its source beside it (a `# source:` comment: the provider's code path, the API reference, a
published transcript), and every recorded body is listed in tests/fixtures/SOURCES.md. A route a stand-in
refuses on purpose says so (`# not stood in:`). See components/NAME/provider_answers.py for the provider texts."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CLOUDS = [*sorted((REPO / "gemma4_t4" / "clouds").rglob("*.py")), REPO / "gemma4_t4" / "testing.py"]
STANDINS = sorted((REPO / "tests").glob("*_standin.py")) + sorted((REPO / "tests" / "guest").glob("*_standin.py"))
FIXTURES = REPO / "tests" / "fixtures"
# Calls that send an answer: a provider invoke's error, an HTTP body.
ANSWER_CALLS = {"ProviderInvokeError", "send_json", "_json", "_reply", "_error", "_send"}
CITED = re.compile(r"#.*\b(source|not stood in):", re.IGNORECASE)
LOOKBACK = 8  # lines above an answer its citation may start


def _name(call: ast.Call) -> str:
    return call.func.id if isinstance(call.func, ast.Name) else getattr(call.func, "attr", "")


def _forwards(call: ast.Call) -> bool:
    """Plumbing: a helper passing on what its caller built (every argument a plain variable)."""
    return all(isinstance(a, ast.Name) for a in [*call.args, *(k.value for k in call.keywords)])


def _handlers(tree: ast.Module) -> set[str]:
    """Methods a cloud's mock_invokes registers: (world or World()).NAME (the world is in its standins.py)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == "mock_invokes":
            names |= {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)}
    return names


# What every cloud's mock_invokes (cloud.py) registers, answered by methods in the same cloud's standins.py.
REGISTERED = set().union(*(_handlers(ast.parse(p.read_text())) for p in CLOUDS))


def answer_sites(path: Path) -> list[tuple[int, int]]:
    """(first line, last line) of every answer the module gives."""
    tree = ast.parse(path.read_text())
    sites = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _name(node) in ANSWER_CALLS and not _forwards(node):
            sites.append((node.lineno, node.end_lineno or node.lineno))
    handlers = _handlers(tree) | REGISTERED
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name in handlers:
            sites += [(r.lineno, r.end_lineno or r.lineno) for r in ast.walk(node) if isinstance(r, ast.Return)]
    return sorted(set(sites))


def uncited(path: Path) -> list[str]:
    lines = path.read_text().splitlines()
    found = []
    for first, last in answer_sites(path):
        window = lines[max(0, first - 1 - LOOKBACK):last]
        if not any(CITED.search(line) for line in window):
            found.append(f"{path.relative_to(REPO)}:{first}: {lines[first - 1].strip()}")
    return found


@pytest.mark.parametrize("path", CLOUDS + STANDINS, ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_stand_in_answer_carries_its_source(path):
    assert uncited(path) == [], "an answer without its source (add `# source: ...` beside it)"


def test_the_clouds_answer_provider_lookups_at_all():
    """The check above reads these modules; it must find the getDisk and getRepository answers."""
    found = {p.relative_to(REPO).as_posix(): answer_sites(p) for p in CLOUDS}
    answers = sum(len(sites) for path, sites in found.items() if path.endswith("/standins.py"))
    assert answers >= 7, found


def test_the_check_fails_for_an_uncited_answer(tmp_path):
    module = tmp_path / "x_standin.py"
    module.write_text("class W:\n    def get(self, args):\n        raise ProviderInvokeError('Error 404: notFound')\n")
    assert len(uncited_at(module)) == 1
    module.write_text("class W:\n    def get(self, args):\n        # source: provider.go:12\n"
                      "        raise ProviderInvokeError('x not found')\n")
    assert uncited_at(module) == []


def uncited_at(path: Path) -> list[int]:
    lines = path.read_text().splitlines()
    return [first for first, last in answer_sites(path)
            if not any(CITED.search(line) for line in lines[max(0, first - 1 - LOOKBACK):last])]


def test_every_recorded_body_is_listed_with_its_source():
    listed = {}
    for line in (FIXTURES / "SOURCES.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 2 and cells[0] not in ("file", "---"):
            listed[cells[0]] = cells[1]
    bodies = [p for p in FIXTURES.rglob("*") if p.is_file() and p.suffix in (".json", ".txt")]
    assert bodies, "no recorded bodies found: the check reads the wrong folder"
    missing = [str(p.relative_to(FIXTURES)) for p in bodies if len(listed.get(str(p.relative_to(FIXTURES)), "")) < 20]
    assert missing == [], "recorded bodies without a source in tests/fixtures/SOURCES.md"
