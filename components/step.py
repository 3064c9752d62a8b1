"""The components' local steps (pulumi-command's local.Command, or its local run invoke, running one of this package's
steps: the account check, the image build, the endpoint watch, the endpoint's creation time, the TTL check): the
`create` that runs a step, the request it hands the step in its environment (StepRequest), and the runner of the
step's main (run_step).

pulumi-command records `create` and `environment` in the stack's state, and a change to either runs the step again
(a changed input is an update, pulumi-go-provider v1.3.0 infer/resource.go `diff`, and an update without `update`
runs `create`, pulumi-command v1.2.1 provider/pkg/provider/local/command.go `Update`; a changed `triggers` replaces,
which runs `create` too). So `create` holds nothing of one machine or of one release's file layout: it is one
fixed line (STEP_LINE) that runs ``python -m gemma4_t4.step NAME``, NAME from STEPS (as stable as the type tokens:
a test pins them), with an interpreter found when the step runs, never a path written into the state:

1. ``$GEMMA4_T4_PYTHON``, when `pulumi up` runs with it;
2. else the project's virtualenv, found as Pulumi finds it for its own Python provider (the dynamic provider's
   launcher, pulumi/pulumi sdk/python/dist/pulumi-resource-pulumi-python): the engine hands every resource
   provider the project's Pulumi.yaml `runtime.options` as ``PULUMI_RUNTIME_<OPTION>`` in its environment
   (sdk/go/common/resource/plugin/provider_plugin.go `NewProvider`; the options are the project's,
   pkg/engine/deployment.go `ProjectInfoContext`), and pulumi-command runs the command with its own
   environment plus `environment` (provider/pkg/provider/local/commandController.go `run`: ``cmd.Env =
   os.Environ()``), so the line reads ``PULUMI_RUNTIME_VIRTUALENV`` (relative to the project: the provider runs in
   the plugin context's directory, plugin.go `ExecPlugin` ``cmd.Dir = pwd``, and the command in the provider's,
   `run` ``cmd.Dir = os.Getwd()``), or, with the uv toolchain and no virtualenv, ``.venv``, with poetry,
   ``poetry env info --path``;
3. else ``$PULUMI_PYTHON_CMD`` or ``python3`` on PATH, the Python Pulumi runs a project without a virtualenv with
   (sdk/python/toolchain/pip.go `CommandPath`), and the one an activated virtualenv (``uv run``, ``poetry run``,
   ``source .venv/bin/activate``) puts first on PATH.

Not the program's own interpreter by its path (``sys.executable``, a different text on every machine and venv),
nor a console script found on PATH: the engine starts the command provider with the environment of `pulumi up`
(NewProvider: ``env := os.Environ()``), not the program's, so the virtualenv's bin is on the provider's PATH only
where the user activated it (the language host puts it first on the program's PATH alone, toolchain/pip.go
`pip.Command`: ``ActivateVirtualEnv``), and a script on PATH may be another install's, of another release. An
interpreter without gemma4_t4 stops the step with exit 2 and the line that names GEMMA4_T4_PYTHON.

A program in another language (the component package, provider/) runs under the package's own virtualenv, which
none of these finds: its `pulumi up` names it with GEMMA4_T4_PYTHON, as the package's preview says
(foreign_program_note; docs/library.md).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from types import MappingProxyType
from typing import ClassVar, Self, TypeVar

PYTHON_ENV = "GEMMA4_T4_PYTHON"

# Every step by its name, as the state records it: a name never changes and never names another step (a module
# may move: its entry here moves with it, and nothing recorded changes). tests/components/test_steps.py pins them.
STEPS: Mapping[str, str] = MappingProxyType({
    "sagemaker-account-check": "gemma4_t4.components.sagemaker.steps.account_check",
    "sagemaker-build": "gemma4_t4.components.sagemaker.steps.build",
    "sagemaker-local-build": "gemma4_t4.components.sagemaker.steps.local_build",
    "sagemaker-endpoint-watch": "gemma4_t4.components.sagemaker.steps.endpoint_watch",
    "sagemaker-created-at": "gemma4_t4.components.sagemaker.steps.created_at",
    "sagemaker-ttl-passed": "gemma4_t4.components.sagemaker.steps.ttl_passed",
    "sagemaker-single-fleet": "gemma4_t4.components.sagemaker.steps.single_fleet",
})

# The `create` of every step, NAME filled in: recorded in every stack's state, so its text never changes (a change
# runs every step of every stack once more), nor does the module it runs, gemma4_t4/step.py. POSIX sh: pulumi-command
# runs it with `/bin/sh -c`.
STEP_LINE = (
    'p="${GEMMA4_T4_PYTHON:-}"; '
    'if [ -z "$p" ]; then '
    'v="${PULUMI_RUNTIME_VIRTUALENV:-}"; '
    'if [ -z "$v" ]; then case "${PULUMI_RUNTIME_TOOLCHAIN:-}" in '
    'uv) v=.venv ;; poetry) v="$(poetry env info --path 2>/dev/null)" ;; esac; fi; '
    'if [ -n "$v" ] && [ -f "${v%/}/bin/python" ]; then p="${v%/}/bin/python"; '
    'else p="${PULUMI_PYTHON_CMD:-python3}"; fi; '
    'fi; '
    '"$p" -c "import gemma4_t4.step" 2>/dev/null || { '
    'echo "gemma4-t4 step {name}: $p cannot import gemma4_t4.step; run pulumi up with GEMMA4_T4_PYTHON set to the '
    'Python that runs the Pulumi program" >&2; exit 2; }; '
    'exec "$p" -m gemma4_t4.step {name}')


def step_command(name: str) -> str:
    """`create` that runs step NAME (one of STEPS) with the interpreter found when it runs (see the module)."""
    if name not in STEPS:
        raise KeyError(f"no step {name!r}: one of {', '.join(STEPS)}")
    return STEP_LINE.replace("{name}", name)


# The components that register steps: what a program in another language (the component package) must name a Python
# for, its project having no Python virtualenv with gemma4-t4 for the line to find.
STEP_COMPONENTS = frozenset({"SageMakerT4Endpoint", "TuringImage"})


def foreign_program_note(component: str, environ: Mapping[str, str]) -> str | None:
    """What the component package says at preview when COMPONENT registers steps and `pulumi up` names no Python."""
    if component not in STEP_COMPONENTS or environ.get(PYTHON_ENV):
        return None
    return (f"{component}'s deploy steps run during `pulumi up` with a Python that has gemma4-t4, which a program in "
            f"another language names: {PYTHON_ENV}={sys.executable} pulumi up (this package's; read when each step "
            "runs, never recorded)")


def run_named(argv: list[str]) -> int:
    """``python -m gemma4_t4.step NAME``: the main of step NAME; exit 2 for a name this release does not know."""
    if len(argv) != 1 or argv[0] not in STEPS:
        from gemma4_t4 import __version__

        print(f"gemma4-t4 step: {' '.join(argv) or 'no name'} is not a step of gemma4-t4 {__version__} "
              f"({', '.join(STEPS)}): the stack's state was written by another release; run `pulumi up` with "
              "the release that wrote it, or a later one", file=sys.stderr)
        return 2
    from importlib import import_module

    main: Callable[[], int] = import_module(STEPS[argv[0]]).main
    return main()


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

