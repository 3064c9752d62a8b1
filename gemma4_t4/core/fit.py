"""The GPU-free fit checker, wherever vLLM imports: every Gemma 4 attention kernel the clamp
launches, compiled for sm_75, with its shared memory, registers and spills. Here if vLLM imports
here, else in each of the project's fit environments (`make fit-env`: one per pinned vLLM)."""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path
from typing import Any

from . import plan as offline
from . import proc
from .targets import TargetError


class FitError(TargetError):
    """The checker could not run (no vLLM, no fit environment, a broken one)."""


def environments(project_dir: Path | None) -> list[Path]:
    try:
        project = offline.find_project(project_dir)
    except FileNotFoundError:
        return []
    return sorted(project.glob(".fit/vllm-*/bin/python"))


def ok(report: dict[str, Any], strict: bool) -> bool:
    return bool(report["fits"] and (report["spill_free"] or not strict))


def run(strict: bool = False, project_dir: Path | None = None) -> list[dict[str, Any]]:
    """One report per vLLM checked (turing_clamp.fit's JSON); ``ok`` says which pass."""
    if importlib.util.find_spec("vllm") is not None:
        from turing_clamp import fit as clamp_fit
        from turing_clamp import policy

        try:
            return [clamp_fit.build_report()]
        except ImportError as err:
            raise FitError(f"vLLM is here but Triton or vLLM does not import ({err}): run `make fit-env`") from None
        except policy.ClampError as err:
            raise FitError(str(err)) from None
    pythons = environments(project_dir)
    if not pythons:
        raise FitError("vLLM is not installed here and the project has no fit environment: run `make fit-env`")
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
