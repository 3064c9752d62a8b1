"""The GPU-free fit checker, wherever vLLM imports: every Gemma 4 attention kernel the clamp
launches, compiled for sm_75, with its shared memory, registers and spills. Here if vLLM imports
here, else in each of the project's fit environments (`make fit-env` in a clone: one per pinned vLLM)."""

from __future__ import annotations

import importlib.util
import json
import os
import shlex
import sys
from pathlib import Path
from typing import Any

from .. import catalog
from . import proc
from .stack_files import find_project
from .targets import TargetError


class FitError(TargetError):
    """The checker could not run (no vLLM, no fit environment, a broken one)."""


def environments(project_dir: Path | None) -> list[Path]:
    try:
        project = find_project(project_dir)
    except FileNotFoundError:
        return []
    return sorted(project.glob(".fit/vllm-*/bin/python"))


def how_to_get_vllm(project_dir: Path | None = None) -> str:
    """Where the checker can get a vLLM, from where the user is: in a clone of the project, its fit environments
    (`make fit-env`, which needs the clone's Makefile); elsewhere, the clamp-verified vLLM in this interpreter
    (PyPI's; the checker hides any GPU, so none is needed)."""
    try:
        project = find_project(project_dir)
    except FileNotFoundError:
        project = None
    if project is not None and (project / "Makefile").is_file() and (project / "turing" / "fit-env.sh").is_file():
        make = "make" if project == Path.cwd().resolve() else f"make -C {shlex.quote(str(project))}"
        return f"run `{make} fit-env` (one environment per pinned vLLM)"
    version = catalog.PINS["vllm.gce"]
    return (f"install the clamp-verified vLLM {version} here (`{shlex.quote(sys.executable)} -m pip install "
            f"vllm=={version}`, several GB; no GPU needed), or run `make fit-env` in a clone of the project")


def ok(report: dict[str, Any], strict: bool) -> bool:
    return bool(report["fits"] and (report["spill_free"] or not strict))


def _here() -> dict[str, Any]:
    from turing_clamp import fit as clamp_fit
    from turing_clamp import policy

    try:
        return clamp_fit.build_report()
    except policy.ClampError as err:
        raise FitError(str(err)) from None


def run(strict: bool = False, project_dir: Path | None = None) -> list[dict[str, Any]]:
    """One report per vLLM checked (turing_clamp.fit's JSON); ``ok`` says which pass. Here where vLLM imports here,
    else in the project's fit environments."""
    pythons = environments(project_dir)
    if importlib.util.find_spec("vllm") is not None:
        try:
            return [_here()]
        except ImportError as err:
            if not pythons:
                raise FitError(f"vLLM is here but Triton or vLLM does not import ({err}): "
                               f"{how_to_get_vllm(project_dir)}") from None
    if not pythons:
        raise FitError(f"vLLM is not installed here and the project has no fit environment: "
                       f"{how_to_get_vllm(project_dir)}")
    reports = []
    for python in pythons:
        # The checker hides any GPU itself; it runs where the environment's vLLM imports.
        # No time limit: compiling every kernel takes what it takes; Ctrl-C still ends it (proc.run).
        done = proc.run([str(python), "-m", "turing_clamp", "fit", "--json"], None,
                        env={**os.environ, "CUDA_VISIBLE_DEVICES": ""}, cwd=python.parent)
        if not done.stdout.strip():
            raise FitError(f"{python}: {done.stderr.strip()[-1000:]}")
        reports.append(json.loads(done.stdout))
    return reports
