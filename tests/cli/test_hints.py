"""Every command line the tools print for the user to run runs where it is printed: each `gemma4-t4 ...` in a
message parses as the CLI takes it (placeholders filled in), a hint's flags are ones its command takes and does
not refuse, and the install hints work outside a clone."""

from __future__ import annotations

import ast
import os
import re
import sys
from pathlib import Path

import pytest
from conftest import REPO

from gemma4_t4 import cli
from gemma4_t4.errors import UsageError

# What a placeholder in a printed command stands for: a value of the right kind, so the line parses as typed.
PLACEHOLDERS = {"STACK": "gce-t4", "N": "2", "FILE": "/tmp/run.json", "DIR": "/tmp", "NAME": "endpoint-1",
                "ZONE": "us-central1-a", "PROJECT": "my-project", "REGION": "us-east-1",
                "URL": "http://127.0.0.1:8000", "A.json": "/tmp/a.json", "B.json": "/tmp/b.json"}
EXPRESSIONS = {"path": "/tmp/run.json", "_origin(err)": "http://127.0.0.1:8000"}  # else a stack's name


def _runtime_strings(path: Path):
    """(line, text) of every string literal and f-string in PATH but its docstrings; an f-string's {expr} kept."""
    tree = ast.parse(path.read_text())
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
                  and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    inside_fstrings = {id(v) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for v in node.values}
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            yield node.lineno, "".join(v.value if isinstance(v, ast.Constant) else "{" + ast.unparse(v.value) + "}"
                                       for v in node.values)
        elif (isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
              and id(node) not in inside_fstrings):
            yield node.lineno, node.value


def _printed_commands():
    for path in sorted((REPO / "gemma4_t4").rglob("*.py")):
        for line, text in _runtime_strings(path):
            for command in re.findall(r"`(gemma4-t4 [^`]*)`", text):
                yield f"{path.relative_to(REPO)}:{line}", command


def _argv(command: str) -> list[str]:
    command = re.sub(r"\{([^}]*)\}", lambda m: EXPRESSIONS.get(m.group(1), "gce-t4"), command)
    return [PLACEHOLDERS.get(word, word) for word in command.split()[1:]]


PRINTED = list(_printed_commands())


def test_the_tools_print_commands_to_run():
    assert len(PRINTED) > 20, PRINTED  # the walk finds them


@pytest.mark.parametrize("where,command", PRINTED, ids=[f"{w} {c}" for w, c in PRINTED])
def test_every_printed_gemma4_t4_command_parses_as_printed(where, command):
    try:
        cli.parse(_argv(command))
    except (UsageError, SystemExit) as err:
        pytest.fail(f"{where}: `{command}` does not run as printed: {err}")


TARGET_COMMANDS = [("status",), ("wait",), ("query", "hi"), ("logs",), ("bench", "run")]


@pytest.mark.parametrize("command", TARGET_COMMANDS, ids=" ".join)
def test_without_pulumi_the_way_around_a_stack_is_one_the_command_takes(command, tmp_path, capsys, monkeypatch):
    """`logs -s STACK` without the Pulumi CLI named --url, which `logs` refuses (a URL has no log)."""
    monkeypatch.setenv("PATH", str(tmp_path))  # no pulumi
    assert cli.main([*command, "-s", "gce-t4"]) == 1
    line = capsys.readouterr().err.strip()
    hint = line.split("; or pass ", 1)[1]
    for alternative in hint.split(", or "):
        argv = [*command, *(PLACEHOLDERS.get(word, word) for word in alternative.split())]
        cli.parse(argv)  # takes the flags
    if command == ("logs",):  # and does not refuse them: a URL has no log
        assert "--url" not in hint, line


def test_install_hint_names_what_installs_here_not_a_package_pypi_lacks(monkeypatch):
    """The extra's packages themselves (PyPI has them; it has no gemma4-t4), with this interpreter's pip, or uv's
    where the virtualenv has no pip."""
    import importlib.util

    from gemma4_t4 import __main__ as entry

    monkeypatch.setattr(entry.metadata, "requires", lambda name: ['rich<16,>=14; extra == "ops"', "pyyaml>=6",
                                                                  'mcp<3,>=2.3; extra == "ops"'])
    monkeypatch.setattr(entry.metadata, "version", lambda name: (_ for _ in ()).throw(
        entry.metadata.PackageNotFoundError(name)) if name == "mcp" else "1.0")
    assert entry.missing_extra() == ["mcp<3,>=2.3"]
    # pip is found or not as find_spec says, faked both ways: looking the real pip up through the import system makes
    # setuptools' distutils shim stand down for the rest of the process (_distutils_hack's spec_for_pip), and a later
    # test in this worker that imports setuptools (tests/install/test_metadata.py, setup.py) then fails.
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: object() if name == "pip" else real_find_spec(name, *a))
    line = entry.install_line(entry.missing_extra())
    assert line == f"{sys.executable} -m pip install 'mcp<3,>=2.3'" and "gemma4-t4[" not in line
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None)
    assert entry.install_line(["mcp<3,>=2.3"]) == f"uv pip install --python {sys.executable} 'mcp<3,>=2.3'"


def test_the_fit_environments_hint_is_make_in_a_clone_and_pip_elsewhere(tmp_path, monkeypatch):
    from gemma4_t4 import catalog
    from gemma4_t4.core import fit

    monkeypatch.chdir(REPO)
    assert fit.how_to_get_vllm() == "run `make fit-env` (one environment per pinned vLLM)"
    monkeypatch.chdir(REPO / "docs")
    assert fit.how_to_get_vllm().startswith(f"run `make -C {REPO} fit-env`")
    (tmp_path / "Pulumi.yaml").write_text("name: gemma4-t4\nruntime: python\n")  # a project, not a clone
    monkeypatch.chdir(tmp_path)
    hint = fit.how_to_get_vllm()
    assert f"`{sys.executable} -m pip install vllm=={catalog.PINS['vllm.gce']}`" in hint and "make fit-env` in a " \
        "clone" in hint
    assert os.path.isfile(REPO / "Makefile") and "fit-env:" in (REPO / "Makefile").read_text()
