"""What the offline plan's mocks answer for a provider: to a create (each cloud's stand-in for its provider's computed
outputs, by the type's package; a local command's output) and to a function the program calls (a stand-in, or the
provider's failure as the engine returns it)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import grpc

# A provider function's stand-in: its arguments -> its result (or a ProviderInvokeError).
Invoke = Callable[[dict[str, Any]], dict[str, Any]]

# What a local command prints, as the mocks answer it: a clock (`date ...`) the time, the image
# build step a digest. MOCK_NOW is the mocks' now: also when a resource the plan creates was created,
# as a cloud's stand-ins answer a step that reads it.
MOCK_NOW = "2030-01-01T00:00:00Z"
# The organization the plan's stacks are in: what a DIY backend names every stack's (see plan_stack).
MOCK_ORGANIZATION = "organization"
MOCK_DIGEST = "sha256:" + "0" * 64


class ProviderInvokeError(grpc.RpcError):
    """A provider's failed invoke as the engine returns it to the program: a gRPC error whose
    details carry the provider's message."""

    def __init__(self, details: str):
        super().__init__(details)
        self._details = details

    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.UNKNOWN

    def details(self) -> str:
        return self._details


# A provider's answer to a create, (type, logical name, inputs, auto-naming suffix) -> (id, state): each
# cloud's stand-in for its provider (gemma4_t4/clouds/NAME/standins.py), by the type's package (the part
# before the first ':').
StateStandIn = Callable[[str, str, dict[str, Any], str], tuple[str, dict[str, Any]]]


def physical_name(logical: str, inputs: dict[str, Any], suffix: str, key: str = "name") -> str:
    """The given physical name, or the logical name plus a random suffix (Pulumi's auto-naming)."""
    return str(inputs.get(key) or f"{logical}-{suffix}")


def any_state(typ: str, logical: str, inputs: dict[str, Any], suffix: str) -> tuple[str, dict[str, Any]]:
    """A resource of a provider no cloud stands in for: its name, and a local command's output."""
    physical = physical_name(logical, inputs, suffix)
    computed: dict[str, Any] = {}
    if typ == "command:local:Command":
        computed["stdout"] = MOCK_NOW if str(inputs.get("create", "")).startswith("date ") else MOCK_DIGEST
    return f"{physical}-id", {**computed, **inputs, "name": physical}


def mock_state(typ: str, logical: str, inputs: dict[str, Any], suffix: str,
               standins: Mapping[str, StateStandIn] | None = None) -> tuple[str, dict[str, Any]]:
    """(id, state) as a provider answers a create: the physical name is the given one, or the
    logical name plus a random suffix (Pulumi's auto-naming); computed outputs the program reads
    are filled in by the cloud's stand-in (STANDINS, by the type's package), so no Output is left unknown."""
    standin = (standins or {}).get(typ.split(":", 1)[0], any_state)
    return standin(typ, logical, inputs, suffix)
