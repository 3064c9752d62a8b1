"""The private and experimental Pulumi APIs gemma4-t4 uses, each exercised as the package uses it, in the interpreter
that runs this file (a venv with the installed wheels: no import from this checkout's tests). pyproject.toml allows
any pulumi 3.x and pulumi-gcp 10.x from its floors, and none of these is covered by their semver:

- pulumi.runtime.sync_await._sync_await (components/gce/checks.py, storage.py): an apiKey Output's value read while the
  component checks its Args, and the disk lookups of every T4 zone gathered and waited on together;
- pulumi_gcp._utilities.get_invoke_opts_defaults (the same lookups): the invoke asks for the installed pulumi-gcp's
  plugin version, as pulumi_gcp's own functions do;
- pulumi.provider.experimental (components/package.py): the analyzer's schema is the committed one, and its
  ComponentProvider constructs a component.

    python tests/pulumi_private_probe.py    # one JSON object: {check: {"ok": bool, "found": what it found}}

tests/components/test_package.py runs it on the lock's versions, tests/install/test_wheel.py on the floors."""

from __future__ import annotations

import importlib.metadata
import importlib.resources
import json
from collections.abc import Callable
from typing import Any

import pulumi
from pulumi.runtime.sync_await import _sync_await
from pulumi_gcp._utilities import get_invoke_opts_defaults

from gemma4_t4.components import GceT4Server
from gemma4_t4.components.package import Provider, schema
from gemma4_t4.testing import GceWorld, ProviderMocks

ZONE, OTHER_ZONE = "us-central1-a", "us-west2-b"


def run(program: Callable[[], Any], mocks: ProviderMocks) -> str:
    """PROGRAM under MOCKS as a user's unit test runs it: its refusal's setting, or "" when it builds."""
    from pulumi.runtime import settings

    settings.reset_options(project="probe", stack="test", preview=False)
    pulumi.runtime.set_mocks(mocks, project="probe", stack="test", preview=False)

    @pulumi.runtime.test
    def test() -> pulumi.Output[int]:
        program()
        return pulumi.Output.from_input(1)

    try:
        test()
    except pulumi.RunError as refused:
        return str(getattr(refused, "setting", type(refused).__name__))
    return ""


class Recording(ProviderMocks):
    def __init__(self, **worlds: Any) -> None:
        super().__init__(**worlds)
        self.registered: list[str] = []

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> Any:
        self.registered.append(args.typ)
        return super().new_resource(args)


def probe() -> dict[str, dict[str, Any]]:
    short_key = pulumi.Output.secret("too-short")
    # A data disk of this stack's, in a T4 zone other than the one asked for: found by the lookups of every zone.
    elsewhere = GceWorld(disks={"test-llm-data": {"zone": OTHER_ZONE, "sizeGb": 100, "type": "pd-balanced",
                                                  "users": ["https://www.googleapis.com/compute/v1/projects/p/zones/"
                                                            f"{OTHER_ZONE}/instances/test-llm-vm"],
                                                  "labels": {"app": "gemma4-t4"}}})
    constructed = Recording()
    committed = json.loads((importlib.resources.files("gemma4_t4.components") / "schema.json").read_text())
    found = {
        "sync_await reads an Output": _sync_await(pulumi.Output.from_input("known").future()),
        "an apiKey Output is checked": run(lambda: GceT4Server("llm", {
            "zone": ZONE, "host": "0.0.0.0", "allow_non_loopback_host": True, "api_key": short_key,
            "api_source_ranges": ["203.0.113.0/24"]}), ProviderMocks()),
        "every zone's disk lookup answers": run(lambda: GceT4Server("llm", {"zone": ZONE}),
                                                ProviderMocks(gce=elsewhere)),
        "invoke defaults name pulumi-gcp's version": get_invoke_opts_defaults().version,
        "the analyzer's schema is the committed one": schema() == committed,
        "construct builds a component": run(lambda: Provider().construct("llm", "gemma4-t4:index:GceT4Server",
                                                                        {"zone": ZONE}), constructed) == ""
        and "gcp:compute/instance:Instance" in constructed.registered,
    }
    expected = {
        "sync_await reads an Output": "known",
        "an apiKey Output is checked": "apiKey",  # the refusal of a key shorter than 32 characters
        "every zone's disk lookup answers": "zone",  # the refusal of a zone whose data disk is in another one
        "invoke defaults name pulumi-gcp's version": importlib.metadata.version("pulumi-gcp"),
        "the analyzer's schema is the committed one": True,
        "construct builds a component": True,
    }
    return {check: {"ok": found[check] == expected[check], "found": found[check]} for check in expected}


if __name__ == "__main__":
    print(json.dumps(probe()))
