"""A local Command run as `pulumi up` runs it, for the steps' recorded line (components/step.py): the engine starts
pulumi-command with the environment of `pulumi up` plus the project's Pulumi.yaml runtime options as
PULUMI_RUNTIME_<OPTION>, and pulumi-command runs `create` with `/bin/sh -c` in its own directory with that
environment and the Command's `environment` on top. And the interpreters a step may be run by: a virtualenv's
`bin/python` that writes where it was run from before it runs this test's Python (which has gemma4_t4)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

# What a shell without any virtualenv activated finds: the system's tools, no project's Python.
BARE_PATH = "/usr/bin:/bin"


def provider_environment(cli: Mapping[str, str], runtime_options: Mapping[str, str],
                         project: str = "gemma4-t4") -> dict[str, str]:
    """The command provider's environment. source: pulumi/pulumi sdk/go/common/resource/plugin/provider_plugin.go
    NewProvider (`env := os.Environ()`, then `PULUMI_RUNTIME_<KEY>=<value>` for each runtime option and
    `PULUMI_PROJECT`), the options being the project's Pulumi.yaml `runtime.options` (pkg/engine/deployment.go
    ProjectInfoContext: `projinfo.Proj.Runtime.Options()`)."""
    return {**cli, **{f"PULUMI_RUNTIME_{key.upper()}": value for key, value in runtime_options.items()},
            "PULUMI_PROJECT": project}


def run_command(create: str, directory: Path, provider: Mapping[str, str],
                environment: Mapping[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """`create` as pulumi-command runs it. source: pulumi/pulumi-command v1.2.1
    provider/pkg/provider/local/commandController.go `run`: `/bin/sh -c COMMAND`, `cmd.Dir` the provider's working
    directory (no `dir` input), `cmd.Env = os.Environ()` with each `environment` entry appended (os/exec keeps the
    last value of a repeated key: the Command's own wins)."""
    return subprocess.run(["/bin/sh", "-c", create], cwd=directory, env={**provider, **(environment or {})},
                          capture_output=True, text=True, timeout=timeout)


def fake_venv(root: Path, log: Path) -> Path:
    """A virtualenv at ROOT whose bin/python (and python3) appends the path it was run by to LOG, then runs this
    test's interpreter: which interpreter a step ran under is read from LOG."""
    bin_dir = root / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    for name in ("python", "python3"):
        script = bin_dir / name
        script.write_text(f'#!/bin/sh\nprintf "%s\\n" "$0" >>"{log}"\nexec "{sys.executable}" "$@"\n')
        script.chmod(0o755)
    return bin_dir / "python"


def ran_by(log: Path) -> set[str]:
    """The interpreters (as each was named when run) that ran since LOG was made."""
    return set(log.read_text().split("\n")) - {""} if log.exists() else set()


def fake_tool(directory: Path, name: str, output: str) -> None:
    """A command NAME in DIRECTORY that prints OUTPUT (poetry's `env info --path`)."""
    directory.mkdir(parents=True, exist_ok=True)
    tool = directory / name
    tool.write_text(f'#!/bin/sh\nprintf "%s\\n" "{output}"\n')
    tool.chmod(0o755)


def cli_environment(**extra: str) -> dict[str, str]:
    """The environment of `pulumi up` from a shell with no virtualenv activated (HOME and the locale kept)."""
    kept = {k: v for k, v in os.environ.items() if k in ("HOME", "LANG", "LC_ALL", "TMPDIR")}
    return {**kept, "PATH": BARE_PATH, **extra}
