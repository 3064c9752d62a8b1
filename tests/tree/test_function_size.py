"""Rooms of a size a person reads: no production function over 80 lines, from its `def` to its last line
(nested functions count in the function that holds them), and no production module over 400 lines.
Production is what the package installs and runs: gemma4_t4/ (the operator side), components/ (the Pulumi
components) and the guest's Python scripts (cloudinit/scripts/*.py). A function that grows past the limit is
split into named steps; a module, by concern (each cloud's component: the same file names in both clouds,
docs/architecture.md)."""

from __future__ import annotations

import ast
import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LIMIT = 80
MODULE_LIMIT = 400


def production_files() -> list[Path]:
    files = [*(REPO / "cloudinit" / "scripts").glob("*.py")]
    for root in (REPO / "gemma4_t4", REPO / "components"):
        # os.walk does not follow links: a checkout's scratch links (gemma4_t4/components -> ../components)
        # would count a file twice.
        for folder, _, names in os.walk(root):
            files += [Path(folder) / name for name in names if name.endswith(".py")]
    return sorted(files)


def long_functions(source: str, limit: int = LIMIT) -> list[tuple[int, str, int]]:
    """(line, name, length in lines) of each function in SOURCE longer than LIMIT."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            if length > limit:
                found.append((node.lineno, node.name, length))
    return sorted(found)


def test_the_measure_finds_a_long_function_and_its_nested_one():
    body = "".join(f"        x{i} = {i}\n" for i in range(LIMIT))
    source = f"@decorated\ndef short():\n    pass\n\n\ndef outer():\n    def inner():\n{body}    return inner\n"
    assert long_functions(source) == [(6, "outer", LIMIT + 3), (7, "inner", LIMIT + 1)]
    assert long_functions("def f():\n" + "    pass\n" * (LIMIT - 1)) == []


def test_the_production_files_are_found_once():
    files = production_files()
    assert REPO / "gemma4_t4" / "mcp" / "server.py" in files and REPO / "components" / "base.py" in files
    assert len({f.resolve() for f in files}) == len(files)


def test_no_production_function_is_over_80_lines():
    offenders = [f"{path.relative_to(REPO)}:{line} {name}() is {length} lines"
                 for path in production_files() for line, name, length in long_functions(path.read_text())]
    assert not offenders, f"split into named steps (at most {LIMIT} lines each):\n" + "\n".join(offenders)


def test_no_production_module_is_over_400_lines():
    offenders = [f"{path.relative_to(REPO)} is {lines} lines" for path in production_files()
                 if (lines := len(path.read_text().splitlines())) > MODULE_LIMIT]
    assert not offenders, f"split by concern (at most {MODULE_LIMIT} lines a module):\n" + "\n".join(offenders)
