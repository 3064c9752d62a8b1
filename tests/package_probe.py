"""What tests/components/test_package.py asks of the component package, run in a process of its own: pulumi.provider
and google-cloud-compute register the same protobuf (google.rpc.Status) and cannot load in one process.

    python tests/package_probe.py schema                 # the package schema, as the provider serves it
    python tests/package_probe.py construct CASES.json   # each case through the Python API and construct
    python tests/package_probe.py refuse TOKEN INPUTS    # a refused construct: the error the engine gets
    python tests/package_probe.py plugin DIR             # start DIR/__main__.py as Pulumi does, ask GetSchema

A case is {"component": "GceT4Server", "args": {python names}, "inputs": {schema names}}; construct
prints, per case, the resources each path registered (type, name, parent, inputs), under the same mocks.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from gemma4_t4 import components
from gemma4_t4.clouds import CLOUDS, standins
from gemma4_t4.components import package
from gemma4_t4.core import plan as offline
from gemma4_t4.core.mock_answers import Invoke
from gemma4_t4.errors import PROJECT

STACK = "probe"


def _invokes() -> dict[str, Invoke]:
    found: dict[str, Invoke] = {}
    for cloud in CLOUDS.values():
        found.update(cloud.mock_invokes(None))
    return found


def _registered(program: Any) -> list[dict[str, Any]]:
    plan = offline.run_program(STACK, {}, invokes=_invokes(), program=program, standins=standins())
    found = [{"type": r.type, "name": r.name, "parent": r.parent, "inputs": r.inputs,
              "outputs": r.registered_outputs} for r in plan.resources]
    # In registration order for the component, then by type and name: children register as their
    # inputs resolve, in an order neither path fixes.
    return found[:1] + sorted(found[1:], key=lambda r: (r["type"], r["name"]))


def construct(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    results = []
    for case in cases:
        component = getattr(components, case["component"])
        token = f"{PROJECT}:index:{case['component']}"
        results.append({
            "python": _registered(lambda component=component, case=case: component("probe", case["args"])),
            "construct": _registered(lambda case=case, token=token: package.Provider().construct(
                "probe", token, case["inputs"])),
        })
    return results


def refuse(token: str, inputs: dict[str, Any]) -> None:
    from pulumi.errors import InputPropertyError

    def program() -> None:
        try:
            package.Provider().construct("probe", token, inputs)
        except InputPropertyError as error:
            print(json.dumps({"property_path": error.property_path, "reason": error.reason}))

    offline.run_program(STACK, {}, invokes=_invokes(), program=program, standins=standins())


def plugin(directory: str) -> str:
    """The schema the plugin in DIRECTORY answers over gRPC, started as the language host starts it."""
    import os
    import subprocess

    import grpc
    from pulumi.runtime.proto import provider_pb2, provider_pb2_grpc

    server = subprocess.Popen([sys.executable, os.path.join(directory, "__main__.py"), "127.0.0.1:1"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=directory)
    try:
        port = server.stdout.readline().strip() if server.stdout else ""
        if not port.isdigit():
            raise SystemExit(f"the plugin printed no port: {server.stderr.read() if server.stderr else ''}")
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = provider_pb2_grpc.ResourceProviderStub(channel)
            return stub.GetSchema(provider_pb2.GetSchemaRequest(), timeout=60).schema
    finally:
        server.terminate()
        server.wait(timeout=30)


def main(argv: list[str]) -> None:
    if argv[0] == "schema":
        print(json.dumps(package.schema(), indent=2, sort_keys=True))
    elif argv[0] == "construct":
        with open(argv[1]) as cases:
            print(json.dumps(construct(json.load(cases)), sort_keys=True))
    elif argv[0] == "refuse":
        refuse(argv[1], json.loads(argv[2]))
    elif argv[0] == "plugin":
        print(plugin(argv[1]))
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
