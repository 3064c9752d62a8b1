"""One room per cloud: gemma4_t4/core knows no cloud. Read from each module's syntax tree, not grep:
what makes core depend on a cloud is an identifier it defines or uses (a name, an attribute, an argument) or
a module it imports; its prose (docstrings, comments, messages) may name a cloud as an example without
depending on it, and is left alone."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "gemma4_t4"
CORE = PACKAGE / "core"
# Where a cloud may be named: its rooms (clouds/NAME/, components/NAME/, the catalog's module) and the guest's and
# the image's files.
ROOMS = ("clouds", "components", "catalog", "cloudinit", "turing")
# The mocks a user's unit tests import take each cloud's world by name (ProviderMocks(gce=GceWorld(...),
# aws=AwsWorld(...)): the signature 0.3.0 published, kept for the programs that use it.
NAMES_CLOUDS_BY_DESIGN = {"testing.py"}
CLOUD_WORDS = re.compile(r"(^|_|\.)(gce|gcp|sagemaker|aws)(_|\.|$)", re.IGNORECASE)


def identifiers(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """Every name the code binds, reads or imports, with its line."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            yield node.lineno, node.id
        elif isinstance(node, ast.Attribute):
            yield node.lineno, node.attr
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield node.lineno, node.name
        elif isinstance(node, ast.arg):
            yield node.lineno, node.arg
        elif isinstance(node, ast.alias):
            yield node.lineno, node.name
            if node.asname:
                yield node.lineno, node.asname
        elif isinstance(node, ast.ImportFrom) and node.module:
            yield node.lineno, node.module
        elif isinstance(node, ast.keyword) and node.arg:
            yield node.lineno, node.arg


def cloud_names(source: str) -> list[str]:
    return [f"line {line}: {name}" for line, name in identifiers(ast.parse(source)) if CLOUD_WORDS.search(name)]


@pytest.mark.parametrize("module", sorted(CORE.glob("*.py")), ids=lambda path: path.name)
def test_core_names_no_cloud(module):
    assert cloud_names(module.read_text()) == []


def outside_the_rooms() -> list[Path]:
    return [path for path in sorted(PACKAGE.rglob("*.py")) if path.relative_to(PACKAGE).parts[0] not in ROOMS
            and path.relative_to(PACKAGE).as_posix() not in NAMES_CLOUDS_BY_DESIGN]


@pytest.mark.parametrize("module", outside_the_rooms(), ids=lambda path: path.relative_to(PACKAGE).as_posix())
def test_the_front_ends_name_no_cloud(module):
    """The CLI, the MCP server, the stack program and the generators ask the registry (gemma4_t4.clouds) and a
    cloud's declared capabilities; what a cloud is lives in its rooms."""
    assert cloud_names(module.read_text()) == []


def test_the_front_ends_are_read():
    found = {path.relative_to(PACKAGE).as_posix() for path in outside_the_rooms()}
    assert {"cli/stop.py", "mcp/tools/stop.py", "mcp/workspace.py", "program.py", "errors.py", "contract.py"} <= found


def test_the_check_sees_a_cloud_in_code_and_not_in_prose():
    assert cloud_names("from ..clouds.gce import target\n") == ["line 1: clouds.gce"]
    assert cloud_names("def f(t):\n    return t.sagemaker_region\n") == ["line 2: sagemaker_region"]
    assert cloud_names("AWS_LOGIN = 1\n") == ["line 1: AWS_LOGIN"]
    assert cloud_names('"""A GCE VM or a SageMaker endpoint."""\n# gcp:project\nx = "aws:region"\n') == []
    assert cloud_names("gauge = awsome = 1\n") == []


# A field named with one cloud's own word: GCE's zones and accelerator types, a GCE machine type, an AWS instance
# type. The core's types carry a cloud's own request or answer as one value that cloud's folder defines (Needs.own,
# RegionRow.within), as SkyPilot's provider_config.
ONE_CLOUDS_WORDS = re.compile(r"(^|_)(zones?|accelerators?|machine_type|instance_type)(_|$)")


def _is_dataclass(node: ast.ClassDef) -> bool:
    def name(decorator: ast.expr) -> str:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        return target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")

    return any(name(decorator) == "dataclass" for decorator in node.decorator_list)


def cloud_fields(source: str) -> list[str]:
    """Each field of a dataclass in SOURCE named with one cloud's word."""
    return [f"line {field.lineno}: {node.name}.{field.target.id}" for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.ClassDef) and _is_dataclass(node) for field in node.body
            if isinstance(field, ast.AnnAssign) and isinstance(field.target, ast.Name)
            and ONE_CLOUDS_WORDS.search(field.target.id)]


@pytest.mark.parametrize("module", sorted(CORE.glob("*.py")), ids=lambda path: path.name)
def test_the_cores_types_have_no_field_of_one_cloud(module):
    assert cloud_fields(module.read_text()) == []


def test_the_field_check_sees_a_clouds_field_in_a_dataclass_only():
    assert cloud_fields("@dataclass(frozen=True)\nclass Needs:\n    zone: str = ''\n    gpus: int = 1\n") == [
        "line 3: Needs.zone"]
    assert cloud_fields("@dataclasses.dataclass\nclass Row:\n    zones: tuple = ()\n    instance_type: str\n") == [
        "line 3: Row.zones", "line 4: Row.instance_type"]
    assert cloud_fields("class Vm:\n    zone: str\n@dataclass\nclass Offer:\n    instance: str\n") == []
