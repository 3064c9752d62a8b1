"""`gemma4-t4 preflight STACK`: can `pulumi up` work in this account, before it is tried?

What the stack needs (Needs) is read off its plan (the real program under mocks) by its cloud
(gemma4_t4.clouds); each cloud asks its own quotas and offerings (gemma4_t4/clouds/NAME/preflight.py)
and answers Checks, each with its fix. The decisions are pure functions of the API responses (as dicts),
tested on recorded ones; the fetch functions only call the clouds' own client libraries.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..checks import Check
from .targets import TargetError

__all__ = ["Check", "Needs", "PreflightError"]


class PreflightError(TargetError):
    """The checks could not run (no credentials, no project, an API error): the message says why."""


@dataclass(frozen=True)
class Needs:
    """What the stack's program would create, as far as quotas and capacity go."""

    cloud: str
    region: str
    zone: str = ""  # GCE
    accelerator: str = ""  # GCE
    gpus: int = 1  # GCE: T4s on the VM
    instance_type: str = ""  # SageMaker
    instances: int = 1  # SageMaker: what the endpoint starts with
    most: int = 1  # SageMaker: the most autoscaling may run (= instances without it)
