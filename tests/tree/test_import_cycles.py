"""No import cycle among gemma4_t4's modules: no module imports, at its top level, one that imports it back, directly
or through others. A function's own import (the heavy SDKs the operator tools load late) runs after every module has
loaded, so it closes no cycle; imports under `if TYPE_CHECKING:` never run. Read with grimp, import-linter's graph
library, from the package as it installs (pyproject.toml's package-dir puts components/, cloudinit/ and turing/
inside gemma4_t4; turing/'s modules are the clamp's source as data, gemma4_t4.turing, importable only as
turing_clamp). That no module imports one from a higher layer is the layers contract's (pyproject.toml,
`make lint`), not this test's."""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
import tomllib
from collections import deque
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DATA_ONLY = "gemma4_t4.turing."


def installed_tree(dest: Path) -> Path:
    """The package's Python files where an install puts them, under dest."""
    package_dir = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    for package, folder in {"gemma4_t4": "gemma4_t4", **package_dir}.items():
        shutil.copytree(REPO / folder, dest.joinpath(*package.split(".")), dirs_exist_ok=True,
                        ignore=lambda _dir, names: [n for n in names if n == "__pycache__"])
    return dest


def top_level_import_lines(source: str) -> set[int]:
    """The lines of the imports a module runs as it loads: its body's, its classes' and its blocks', not a
    function's."""
    lines: set[int] = set()
    pending = list(ast.parse(source).body)
    while pending:
        node = pending.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            lines.add(node.lineno)
        elif not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for field in ("body", "orelse", "finalbody", "handlers", "cases"):
                pending.extend(getattr(node, field, None) or [])
    return lines


def _source(root: Path, module: str) -> str:
    path = root.joinpath(*module.split("."))
    return (path / "__init__.py" if path.is_dir() else path.with_suffix(".py")).read_text()


def module_level_graph(root: Path) -> dict[str, set[str]]:
    """gemma4_t4's modules under root -> the gemma4_t4 modules each imports at its top level. Run with root first on
    sys.path (grimp finds the package by importing its name)."""
    import grimp

    graph = grimp.build_graph("gemma4_t4", cache_dir=None, exclude_type_checking_imports=True)
    modules = {m for m in graph.modules if not m.startswith(DATA_ONLY)}
    edges = {}
    for module in sorted(modules):
        lines = top_level_import_lines(_source(root, module))
        edges[module] = {imported for imported in graph.find_modules_directly_imported_by(module) & modules
                         if any(d["line_number"] in lines
                                for d in graph.get_import_details(importer=module, imported=imported))}
    return edges


def _shortest_cycle(edges: dict[str, set[str]], start: str) -> list[str] | None:
    came_from: dict[str, str] = {}
    queue = deque([start])
    while queue:
        module = queue.popleft()
        for imported in sorted(edges[module]):
            if imported == start:
                chain = [module]
                while chain[-1] != start:
                    chain.append(came_from[chain[-1]])
                return [start, *reversed(chain[:-1]), start]
            if imported not in came_from:
                came_from[imported] = module
                queue.append(imported)
    return None


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """One shortest cycle through each module that has one, each cycle once: [a, b, ..., a]."""
    found: dict[frozenset[str], list[str]] = {}
    for module in sorted(edges):
        cycle = _shortest_cycle(edges, module)
        if cycle is not None:
            found.setdefault(frozenset(cycle), cycle)
    return list(found.values())


def cycles_in(root: Path) -> list[list[str]]:
    """The cycles of the package under root, read in a fresh interpreter (this one has the checkout's gemma4_t4)."""
    script = (f"import json, sys; sys.path[:0] = [{str(root)!r}, {str(Path(__file__).parent)!r}]; "
              "from test_import_cycles import cycles, module_level_graph; "
              f"print(json.dumps(cycles(module_level_graph(__import__('pathlib').Path({str(root)!r})))))")
    done = subprocess.run([sys.executable, "-c", script], cwd=root, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def test_no_module_level_import_cycle(tmp_path):
    found = cycles_in(installed_tree(tmp_path))
    assert found == [], "import cycles (each from a module back to it):\n" + "\n".join(" -> ".join(c) for c in found)


def test_a_planted_cycle_is_found_and_a_functions_import_closes_none(tmp_path):
    root = installed_tree(tmp_path)
    plant = {"_planted_a": "from gemma4_t4 import _planted_b\n", "_planted_b": "import gemma4_t4._planted_c\n",
             "_planted_c": "from ._planted_a import x\n",
             "_late_a": "import gemma4_t4._late_b\n", "_late_b": "def f():\n    from gemma4_t4 import _late_a\n"}
    for name, text in plant.items():
        (root / "gemma4_t4" / f"{name}.py").write_text(text + "x = 1\n")
    assert cycles_in(root) == [["gemma4_t4._planted_a", "gemma4_t4._planted_b", "gemma4_t4._planted_c",
                                "gemma4_t4._planted_a"]]
