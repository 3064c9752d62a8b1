"""The `create` of the components' local steps (pulumi-command's local.Command running one of this package's
modules: the account check, the image build, the endpoint watch, the TTL check).

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

import os
import re
import sys

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
