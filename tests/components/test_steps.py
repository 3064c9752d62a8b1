"""The local steps' recorded command (components/step.py): one fixed line per step name, the same from every machine,
virtualenv and release layout, which finds its interpreter when it runs, as pulumi-command runs it
(tests/command_standin.py). A different text in the state would run the step again on the next `pulumi up`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib import import_module
from types import MappingProxyType

import pytest
from command_standin import (
    cli_environment,
    fake_tool,
    fake_venv,
    provider_environment,
    ran_by,
    run_command,
)
from conftest import REPO

from gemma4_t4.components import step as steps

COMMAND = "command:local:Command"
# The names the state of every deployed stack records: as stable as the type tokens. A new step adds a name; none
# is ever renamed, removed or given to another step.
NAMES = {"sagemaker-account-check", "sagemaker-build", "sagemaker-local-build", "sagemaker-endpoint-watch",
         "sagemaker-created-at", "sagemaker-ttl-passed", "sagemaker-single-fleet"}
# The line every step's `create` is, as 0.4.0 records it. Changing it runs every step of every stack once more.
ACCOUNT_CHECK_LINE = (
    'p="${GEMMA4_T4_PYTHON:-}"; if [ -z "$p" ]; then v="${PULUMI_RUNTIME_VIRTUALENV:-}"; if [ -z "$v" ]; then '
    'case "${PULUMI_RUNTIME_TOOLCHAIN:-}" in uv) v=.venv ;; poetry) v="$(poetry env info --path 2>/dev/null)" ;; '
    'esac; fi; if [ -n "$v" ] && [ -f "${v%/}/bin/python" ]; then p="${v%/}/bin/python"; else '
    'p="${PULUMI_PYTHON_CMD:-python3}"; fi; fi; "$p" -c "import gemma4_t4.step" 2>/dev/null || { echo "gemma4-t4 '
    'step sagemaker-account-check: $p cannot import gemma4_t4.step; run pulumi up with GEMMA4_T4_PYTHON set to the '
    'Python that runs the Pulumi program" >&2; exit 2; }; exec "$p" -m gemma4_t4.step sagemaker-account-check')
# A step run without its request: it exits 2 naming the variable, which shows its main ran.
PROBE = "sagemaker-ttl-passed"
PROBE_SAYS = "ttl: GEMMA4_T4_TTL_PASSED is missing or malformed"


def test_the_step_names_are_pinned_and_each_names_its_own_step():
    assert set(steps.STEPS) == NAMES
    for name, module in steps.STEPS.items():
        found = import_module(module)
        assert name == found.NAME and found.command() == steps.step_command(name)


def test_the_recorded_line_is_the_one_every_stack_holds():
    assert steps.step_command("sagemaker-account-check") == ACCOUNT_CHECK_LINE


def _recorded(plan) -> dict[str, str]:
    """What pulumi-command keeps of each step in the state: its create, environment and triggers."""
    return {s.name: json.dumps({k: s.inputs.get(k) for k in ("create", "environment", "triggers")}, sort_keys=True)
            for s in plan.find(COMMAND)}


def _program_in(project, interpreter, monkeypatch) -> None:
    """The Pulumi program run from PROJECT by INTERPRETER, as the language host runs it."""
    project.mkdir(parents=True, exist_ok=True)
    monkeypatch.chdir(project)
    monkeypatch.setattr(sys, "executable", str(interpreter))


@pytest.mark.parametrize("overrides", [("endpointTtl=8h",), ("imageBuilder=local", "endpointTtl=8h"),
                                       ("fleetChange=single",)], ids=" ".join)
def test_two_venvs_in_two_places_record_the_same_steps(run_stack, overrides, tmp_path, monkeypatch):
    """Alice's virtualenv in her clone (Pulumi.yaml's .venv), Bob's in Poetry's cache outside his: the same state,
    so Bob's `up` runs none of Alice's steps again."""
    recorded, places = [], []
    for project, venv in ((tmp_path / "alice" / "gemma4-t4", tmp_path / "alice" / "gemma4-t4" / ".venv"),
                          (tmp_path / "bob" / "src", tmp_path / "bob" / ".cache" / "pypoetry" / "env-py3.12")):
        _program_in(project, fake_venv(venv, tmp_path / "log"), monkeypatch)
        recorded.append(_recorded(run_stack("sagemaker-t4", *overrides)))
        places += [str(project), str(venv)]
    assert recorded[0] == recorded[1]
    assert {"gemma4-t4-account-check", "gemma4-t4-endpoint-watch"} <= set(recorded[0])
    text = json.dumps(recorded[0])
    here = [*places, str(REPO), os.path.realpath(REPO), sys.base_prefix, os.path.expanduser("~"), str(tmp_path)]
    assert not [p for p in here if p in text], text


def test_a_release_that_moves_the_steps_modules_records_the_same_steps(run_stack, monkeypatch):
    """The state names a step, never its module: a later layout (every step in another package) records the same."""
    before = _recorded(run_stack("sagemaker-t4", "endpointTtl=8h"))
    assert not [text for text in before.values() if "gemma4_t4.components" in text]
    moved = {name: module.replace("gemma4_t4.components.sagemaker.steps", "gemma4_t4.aws.deploy")
             for name, module in steps.STEPS.items()}
    monkeypatch.setattr(steps, "STEPS", MappingProxyType(moved))
    assert _recorded(run_stack("sagemaker-t4", "endpointTtl=8h")) == before


# --- the line, run as pulumi-command runs it --------------------------------------------------------------------


@pytest.fixture
def machine(tmp_path):
    """A teammate's machine: the project, a log of the interpreters run, and a virtualenv outside the project."""
    project = tmp_path / "project"
    project.mkdir()
    return project, tmp_path / "ran", tmp_path / "elsewhere" / "venv"


@pytest.mark.parametrize("where", ["GEMMA4_T4_PYTHON", "virtualenv", "virtualenv/", "absolute virtualenv", "uv",
                                   "poetry", "activated", "PULUMI_PYTHON_CMD"])
def test_the_step_runs_with_the_interpreter_pulumi_runs_the_project_with(machine, where):
    """Found when the step runs, in the order of components/step.py: GEMMA4_T4_PYTHON, the project's virtualenv as
    Pulumi.yaml names it (PULUMI_RUNTIME_VIRTUALENV, else the toolchain's), else python3 on PATH."""
    project, log, elsewhere = machine
    in_project = fake_venv(project / ".venv", log)
    outside = fake_venv(elsewhere, log)
    tools = project.parent / "tools"
    options, cli, expected = {"toolchain": "pip", "virtualenv": ".venv"}, {}, ".venv/bin/python"
    if where == "GEMMA4_T4_PYTHON":
        cli, expected = {"GEMMA4_T4_PYTHON": str(outside)}, str(outside)
    elif where == "virtualenv/":
        options["virtualenv"] = ".venv/"
    elif where == "absolute virtualenv":
        options["virtualenv"], expected = str(elsewhere), str(outside)
    elif where == "uv":
        options = {"toolchain": "uv"}
    elif where == "poetry":
        fake_tool(tools, "poetry", str(elsewhere))
        options, expected = {"toolchain": "poetry"}, str(outside)
    elif where == "activated":  # `uv run pulumi up`, `poetry run pulumi up`, an activated venv: first on PATH
        options, expected = {}, str(outside.with_name("python3"))
        cli = {"PATH": f"{outside.parent}:/usr/bin:/bin"}
    elif where == "PULUMI_PYTHON_CMD":
        options, cli, expected = {}, {"PULUMI_PYTHON_CMD": str(outside)}, str(outside)
    assert in_project.exists()
    env = provider_environment(cli_environment(**cli), options)
    env["PATH"] = f"{tools}:{env['PATH']}"
    done = run_command(steps.step_command(PROBE), project, env)
    assert done.returncode == 2 and PROBE_SAYS in done.stderr, done.stderr
    assert ran_by(log) == {expected}


def test_a_python_without_the_package_stops_with_the_fix(machine):
    project, _, _ = machine
    for cli in ({}, {"GEMMA4_T4_PYTHON": "/nonexistent/python"}):
        done = run_command(steps.step_command(PROBE), project, provider_environment(cli_environment(**cli), {}))
        found = cli.get("GEMMA4_T4_PYTHON", "python3")
        assert done.returncode == 2 and done.stderr == (
            f"gemma4-t4 step {PROBE}: {found} cannot import gemma4_t4.step; run pulumi up with GEMMA4_T4_PYTHON set to "
            "the Python that runs the Pulumi program\n"), done.stderr


def test_a_path_the_shell_reads_specially_is_run_as_it_is(machine):
    project, log, _ = machine
    odd = fake_venv(project.parent / 'my "env" $HOME `x`', log)
    done = run_command(steps.step_command(PROBE), project,
                       provider_environment(cli_environment(), {"virtualenv": str(odd.parents[1])}))
    assert done.returncode == 2 and PROBE_SAYS in done.stderr, done.stderr
    assert ran_by(log) == {str(odd)}


def test_a_name_this_release_does_not_know_says_so():
    done = subprocess.run([sys.executable, "-m", "gemma4_t4.step", "sagemaker-from-the-future"], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2 and "sagemaker-from-the-future is not a step of gemma4-t4" in done.stderr
    assert "run `pulumi up` with the release that wrote it, or a later one" in done.stderr


def test_a_program_in_another_language_is_told_to_name_the_python_of_the_components_with_steps(run_stack):
    """The component package warns at preview for each component that registers steps (a project in another language
    has no Python virtualenv with gemma4-t4 for the line to find), until `pulumi up` runs with GEMMA4_T4_PYTHON."""
    with_steps = set()
    for plan in (run_stack("gce-t4"), run_stack("sagemaker-t4", "endpointTtl=8h")):
        with_steps |= {step.parent.split("::")[0].rsplit(":", 1)[1] for step in plan.find(COMMAND)
                       if "-m gemma4_t4.step " in step.inputs["create"]}
    assert with_steps == steps.STEP_COMPONENTS == {"SageMakerT4Endpoint", "TuringImage"}
    for component in with_steps:
        note = steps.foreign_program_note(component, {})
        assert note and f"GEMMA4_T4_PYTHON={sys.executable} pulumi up" in note
        assert steps.foreign_program_note(component, {"GEMMA4_T4_PYTHON": "/opt/venv/bin/python"}) is None
    assert steps.foreign_program_note("GceT4Server", {}) is None
