"""The Python examples of the pages a user reads (README.md, docs/*.md), read from the pages themselves and run as
written by a given interpreter: the lock's (this checkout's .venv, tests/cli/test_docs.py) and the lowest versions
pyproject.toml allows (tests/install/test_wheel.py). A page's example is one of two kinds:

- a unit test (it calls `set_mocks` itself): run as a file of its own, then each of its `test_` functions, as pytest
  would call them;
- a program: run as `pulumi up` runs one, under the project's own mocks (gemma4_t4.testing.ProviderMocks), and each
  resource it registers must register (a refusal in an apply fails it, as it fails an `up`).

Each runs in a fresh interpreter with the environment of someone else's machine: no PYTHONPATH into this checkout,
no AWS region from the environment (an example that needs one says so in its code)."""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from conftest import REPO

PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
DONE = "example ran"

PROGRAM = f'''
import runpy
import pulumi
from gemma4_t4.testing import ProviderMocks

pulumi.runtime.set_mocks(ProviderMocks(), project="example", stack="test", preview=False)


@pulumi.runtime.test
def program():
    runpy.run_path("example.py", run_name="__main__")
    return pulumi.Output.from_input(1)


program()
print("{DONE}")
'''

UNIT_TEST = f'''
import runpy

found = runpy.run_path("example.py", run_name="example")
tests = [test for name, test in found.items() if name.startswith("test_") and callable(test)]
assert tests, "a unit-test example without a test function"
for test in tests:
    test()
print("{DONE}")
'''


@dataclass(frozen=True)
class Example:
    page: str
    line: int
    code: str

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"

    @property
    def runner(self) -> str:
        return UNIT_TEST if "set_mocks(" in self.code else PROGRAM


def examples() -> list[Example]:
    """Every ```python block of the user's pages, where it starts."""
    found = []
    for page in PAGES:
        text = page.read_text()
        for block in re.finditer(r"^```python\n(.*?)^```", text, re.MULTILINE | re.DOTALL):
            line = text.count("\n", 0, block.start()) + 1
            found.append(Example(page.relative_to(REPO).as_posix(), line, block[1]))
    return found


def run(example: Example, python: str | Path, work: Path) -> subprocess.CompletedProcess:
    """EXAMPLE run by PYTHON in the empty folder WORK."""
    work.mkdir(parents=True, exist_ok=True)
    (work / "example.py").write_text(example.code)
    (work / "run_example.py").write_text(example.runner)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "AWS_REGION", "AWS_DEFAULT_REGION")}
    return subprocess.run([str(python), "run_example.py"], capture_output=True, text=True, cwd=work, env=env,
                          timeout=600)


def ran(done: subprocess.CompletedProcess) -> bool:
    return done.returncode == 0 and done.stdout.strip().endswith(DONE)
