"""`gemma4-t4 preflight STACK`: can `pulumi up` work in this account, before it is tried?

What the stack needs (Needs) is read off its plan (the real program under mocks) by its cloud
(gemma4_t4.clouds); each cloud asks its own quotas and offerings (gemma4_t4/clouds/NAME/preflight.py)
and answers Checks, each with its fix. The decisions are pure functions of the API responses (as dicts),
tested on recorded ones; the fetch functions only call the clouds' own client libraries.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

from .targets import TargetError

__all__ = ["Needs", "PreflightError"]

Own = TypeVar("Own")


class PreflightError(TargetError):
    """The checks could not run (no credentials, no project, an API error): the message says why."""


@dataclass(frozen=True)
class Needs(Generic[Own]):
    """What the stack's program would create, as far as quotas and capacity go: where, and the cloud's own request
    (OWN: a value its folder defines, e.g. the accelerator and how many, or the instance type and how many), which
    only that cloud reads (as SkyPilot's provider_config)."""

    cloud: str
    region: str
    own: Own
