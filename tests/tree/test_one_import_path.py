"""One way to each thing: each name has one import path, the module that defines it. A module's `__all__` lists
only names the module defines (a def, a class, an assignment), never one it imports from another module: such a
re-export is a second path to the name, and importers drift between the two. The public API gathers names from
their modules on purpose, and is exempt: a package's `__init__.py` (`gemma4_t4.components`, `.gce`,
`.sagemaker`: docs/library.md) and the names PUBLIC lists below, each with why."""

from __future__ import annotations

import ast
import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# Modules whose `__all__` is published API gathering names from elsewhere, by the names they may re-export.
PUBLIC = {
    # The mocks a user's unit tests import (docs/library.md, docs/architecture.md): ProviderMocks with its worlds
    # and the error an INVOKES handler raises; GET_REGION as 0.3.0's `gemma4_t4.testing` published it (CHANGELOG,
    # "Imports that moved").
    "gemma4_t4/testing.py": {"GET_REGION", "AwsWorld", "GceWorld", "ProviderInvokeError", "default_provider_region"},
}


def production_modules() -> list[Path]:
    files = []
    for root in (REPO / "gemma4_t4", REPO / "components"):
        # os.walk does not follow links: a checkout's scratch link gemma4_t4/components would count a file twice.
        for folder, _, names in os.walk(root):
            files += [Path(folder) / name for name in names if name.endswith(".py") and name != "__init__.py"]
    return sorted(files)


def _module_statements(tree: ast.Module) -> list[ast.stmt]:
    """The statements that run as the module loads: its body's and its blocks' (if, try, with), not a def's or a
    class's."""
    found, pending = [], list(tree.body)
    while pending:
        node = pending.pop()
        found.append(node)
        if isinstance(node, ast.If | ast.Try | ast.With | ast.For | ast.While):
            pending += [child for child in ast.iter_child_nodes(node) if isinstance(child, ast.stmt)]
            for handler in getattr(node, "handlers", []):
                pending += handler.body
    return found


def reexported(source: str) -> list[str]:
    """The names SOURCE's `__all__` lists that the module imports rather than defines."""
    all_names: list[str] = []
    defined: set[str] = set()
    imported: set[str] = set()
    for node in _module_statements(ast.parse(source)):
        if isinstance(node, ast.Import | ast.ImportFrom):
            imported |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            defined.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                names = {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
                if "__all__" in names and isinstance(node.value, ast.List | ast.Tuple):
                    all_names += [e.value for e in node.value.elts if isinstance(e, ast.Constant)]
                defined |= names
    return sorted(name for name in all_names if name in imported and name not in defined)


def test_the_measure_finds_a_reexport_and_spares_a_definition():
    source = ("from .names import endpoint_name, GCE_NAME_MAX\nimport pulumi\nfrom . import clamp as c\n"
              "if True:\n    from .x import hidden\n"
              "GCE_NAME_MAX = GCE_NAME_MAX + 0\n\ndef own():\n    pass\n\nclass Own:\n    pass\n\n"
              "__all__ = ['GCE_NAME_MAX', 'Own', 'c', 'endpoint_name', 'hidden', 'own', 'pulumi']\n")
    assert reexported(source) == ["c", "endpoint_name", "hidden", "pulumi"]
    assert reexported("from .a import b\n") == []


def test_no_module_reexports_a_name_it_does_not_define():
    found = {}
    for path in production_modules():
        names = set(reexported(path.read_text()))
        names -= PUBLIC.get(str(path.relative_to(REPO)), set())
        if names:
            found[str(path.relative_to(REPO))] = sorted(names)
    assert found == {}, ("these modules' __all__ lists names they import: import each from the module that defines "
                         f"it, and drop it from __all__: {found}")


def test_the_public_exemptions_are_still_reexports():
    # An exemption whose name the module now defines, or no longer lists, is stale: drop it.
    for relative, names in PUBLIC.items():
        assert set(reexported((REPO / relative).read_text())) == names, relative
