"""The components' local steps (pulumi-command's local.Command, or its local run invoke, running one of this package's
modules: the account check, the image build, the endpoint watch, the endpoint's creation time, the TTL check): the
`create` that runs a step's module, the request it hands the step in its environment (StepRequest), and the runner
of the step's main (run_step).

pulumi-command records `create` (and `environment`) in the stack's state, and a change to either runs the step
again. So neither may hold anything of one machine: `create` names the interpreter by its path relative to the
project (the virtualenv Pulumi.yaml names lives there in every clone), and an interpreter elsewhere is named at
run time by GEMMA4_T4_PYTHON, which pulumi-command reads from the environment of `pulumi up` and never records.

The path is relative to the program's working directory, and the step runs in the same one: the engine starts
the command provider in the plugin context's working directory, the project's (pulumi/pulumi
pkg/resource/plugin/plugin.go, execPlugin: `cmd.Dir = pwd`), where `pulumi up` runs the program too (a program's
relative paths, e.g. a FileAsset's, are read from there); pulumi-command runs `create` with `/bin/sh -c` in its
own working directory unless `dir` is given (its `interpreter` and `dir` inputs).
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from types import MappingProxyType
from typing import ClassVar, Self, TypeVar

PYTHON_ENV = "GEMMA4_T4_PYTHON"


def program_interpreter() -> str:
    """The interpreter running the Pulumi program, relative to the program's directory when it lies inside it
    (.venv/bin/python), else its absolute path (then the state names this machine's: set GEMMA4_T4_PYTHON on
    the others, or keep the virtualenv in the project)."""
    executable = os.path.abspath(sys.executable)  # a virtualenv's own path, not the base interpreter it links to
    relative = os.path.relpath(executable, os.getcwd())
    return executable if relative.startswith(os.pardir) else relative


def python_step(module: str) -> str:
    """`create` that runs MODULE with GEMMA4_T4_PYTHON if set, else the program's interpreter (see the module)."""
    default = program_interpreter()
    if "/" not in default:  # a bare name would be looked up on PATH, not in the project
        default = f"./{default}"
    # The default sits inside "${...:-...}": the characters a double-quoted word treats specially are escaped.
    escaped = re.sub(r'([\\$`"])', r"\\\1", default)
    return f'"${{{PYTHON_ENV}:-{escaped}}}" -m {module}'


# --- The step's side: its request, read back from the environment, and the runner ---------------------------------

# A field the component never sends: a knob a test may set in the request (a poll interval, a wait).
LOCAL_ONLY = MappingProxyType({"sent": False})


@dataclass(frozen=True)
class StepRequest:
    """What the component hands one step, as JSON in one environment variable (ENV, named here once): the component
    writes it with ``encode`` (its fields in their order, the local-only ones left out), the step reads it with
    ``from_env``. pulumi-command records the environment in the state: the same request is the same text."""

    ENV: ClassVar[str]

    def encode(self) -> str:
        return json.dumps({item.name: getattr(self, item.name) for item in fields(self)
                           if item.metadata.get("sent", True)})

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Self:
        """The request in ENV; KeyError, TypeError or ValueError when it is missing or malformed."""
        found = json.loads(env[cls.ENV])
        if not isinstance(found, dict):
            raise TypeError(f"a JSON object was expected, not {type(found).__name__}")
        return cls(**found)


R = TypeVar("R", bound=StepRequest)


class StepFailed(Exception):
    """The step could not do its work: its message is the one line `pulumi up` shows (exit status 1)."""


def say_as(step: str) -> Callable[[str], None]:
    """The step's voice on stderr (stdout is its answer, which the state records): "STEP: message"."""
    def say(message: str) -> None:
        print(f"{step}: {message}", file=sys.stderr, flush=True)
    return say


def malformed(say: Callable[[str], None], name: str, error: Exception) -> int:
    say(f"{name} is missing or malformed ({error}): this step is run by `pulumi up`")
    return 2


def run_step(request_type: type[R], body: Callable[[R, dict[str, str]], int], say: Callable[[str], None],
             env: Mapping[str, str] | None = None) -> int:
    """A step's main: its request from the environment (exit 2 when missing or malformed: only `pulumi up` runs
    it), then BODY; a StepFailed is its one-line failure (exit 1)."""
    given = dict(os.environ if env is None else env)
    try:
        request = request_type.from_env(given)
    except (KeyError, TypeError, ValueError) as err:
        return malformed(say, request_type.ENV, err)
    try:
        return body(request, given)
    except StepFailed as err:
        say(str(err))
        return 1

