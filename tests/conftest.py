"""Shared fixtures. Pulumi's mocks are set afresh for every program run (never per module):
`plan.run_program` resets the runtime, installs the mocks with preview=False, so an output the
mocks do not return is None rather than unknown, and every apply runs."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "turing"))

from components.errors import ConfigError  # noqa: E402
from gemma4_t4 import plan as plan_mod  # noqa: E402


@pytest.fixture
def run_stack():
    """run_stack(stack, *overrides) -> Plan, with overrides as `--config KEY=VALUE`."""

    def run(stack: str, *overrides: str) -> plan_mod.Plan:
        return plan_mod.run_program(stack, plan_mod.load_stack_config(stack, list(overrides)))

    return run


@pytest.fixture
def refused_stack():
    """refused_stack(stack, *overrides) -> (ConfigError, Plan): the program must refuse."""

    def run(stack: str, *overrides: str):
        partial = plan_mod.Plan(stack)
        with pytest.raises(ConfigError) as caught:
            plan_mod.run_program(stack, plan_mod.load_stack_config(stack, list(overrides)), plan=partial)
        return caught.value, partial

    return run


def require_tool(name: str) -> str:
    """A checker the suite depends on: missing means the environment is wrong, so fail."""
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} is not installed: run .ci/run's install step (apt-get install ...)")
    return path


def run(cmd: list[str], **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, **kwargs)
