"""One answer of a check run before `pulumi up` changes anything: what the operator's preflight prints
(gemma4_t4/core/preflight.py) and what the account check `pulumi up` itself runs says (a component's step).
Below both, with the facts, so either may build one."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""
    warning: bool = False  # ok, but something the user should know before `pulumi up`
