"""The offline plan: the real stack program (gemma4_t4.program, which the project's __main__.py
runs) under Pulumi's mocks, no CLI or cloud needed, from a checkout or an installed wheel.

Config is assembled the way the Pulumi CLI would (stack_files.load_stack_config). Every resource the
program registers is recorded with its parent, its inputs as the engine sees them (camelCase, numbers
as floats) and the aliases it declares; what the mocks answer is mock_answers', what the plan prints
beside it plan_lines', and what a change of config does to it changes'.

Lookups the program makes (invokes) are answered by the handlers the caller passes (each cloud's
stand-in for its provider's functions, given what already exists: gemma4_t4.clouds). The offline
`plan` command passes an empty world, i.e. it shows a first `pulumi up` in an empty project.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib.util
import json
import runpy
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import PROJECT, UNDECRYPTED_SECRET
from .mock_answers import MOCK_ORGANIZATION, Invoke, StateStandIn, mock_state
from .plan_lines import cost_range
from .stack_files import secret_keys

__all__ = ["PROGRAM", "SECRET_PLACEHOLDER", "Plan", "RegisteredResource", "engine_urn", "run_program"]

# The stack program, by module name: run as Pulumi runs a program, never imported by the core.
PROGRAM = "gemma4_t4.program"
SECRET_PLACEHOLDER = UNDECRYPTED_SECRET


def _as_config_string(value: Any) -> str:
    if isinstance(value, dict) and set(value) == {"secure"}:
        return SECRET_PLACEHOLDER
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return json.dumps(value)
    return str(value)


@dataclass
class RegisteredResource:
    type: str
    name: str
    urn: str
    parent: str | None
    custom: bool
    inputs: dict[str, Any]
    options: dict[str, Any]
    # What the mock provider answered: the inputs plus the physical name, id and computed outputs.
    state: dict[str, Any] = field(default_factory=dict)
    # For a component: what it passed to register_outputs (None if it never did).
    registered_outputs: dict[str, Any] | None = None

    @property
    def label(self) -> str:
        return f"{self.type}::{self.name}"

    def as_json(self) -> dict[str, Any]:
        return {"type": self.type, "name": self.name, "parent": self.parent, "inputs": self.inputs,
                "options": self.options}


@dataclass
class Plan:
    stack: str
    resources: list[RegisteredResource] = field(default_factory=list)
    outputs: dict[str, Any] = field(default_factory=dict)

    def find(self, type_: str, name: str | None = None) -> list[RegisteredResource]:
        return [r for r in self.resources if r.type == type_ and (name is None or r.name == name)]

    def one(self, type_: str, name: str | None = None) -> RegisteredResource:
        found = self.find(type_, name)
        if len(found) != 1:
            raise AssertionError(f"expected one {type_}{f' named {name}' if name else ''}, "
                                 f"found {[r.name for r in found]}")
        return found[0]

    def as_json(self) -> dict[str, Any]:
        return {
            "stack": self.stack,
            "resources": [r.as_json() for r in self.resources],
            "outputs": self.outputs,
            # The stack output cost_per_hour_usd, named as every --json document names it (docs/json.md).
            "running_usd_per_hour": self.outputs.get("cost_per_hour_usd"),
            "running_usd_per_hour_range": cost_range(self),
        }


def engine_urn(parent: str, type_: str, name: str) -> str:
    """A resource's URN as the engine makes it (pulumi/pulumi pkg/resource/urn.go, NewURN from the step
    generator's generateURN): the parent's whole qualified type, none for the root stack. The mock
    monitor's own keeps only the parent's last type, which a nested component's children would not match."""
    import pulumi

    if parent:
        qualified = parent.split("::")[2]
        if qualified != ROOT_STACK:
            type_ = f"{qualified}${type_}"
    return "urn:pulumi:" + "::".join([pulumi.get_stack(), pulumi.get_project(), type_, name])


ROOT_STACK = "pulumi:pulumi:Stack"


def _suffix(stack: str, typ: str, logical: str) -> str:
    """Auto-naming's suffix: random-looking as Pulumi's, but the same each run, so two plans compare."""
    return hashlib.sha256(f"{stack}|{typ}|{logical}".encode()).hexdigest()[:7]


# Pulumi's runtime settings are process-wide: one program at a time, whichever thread asks.
_PROGRAM_LOCK = threading.Lock()


def run_program(stack: str, config: dict[str, Any], plan: Plan | None = None,
                invokes: Mapping[str, Invoke] | None = None, program: Callable[[], Any] | None = None,
                mocks: Any = None, standins: Mapping[str, StateStandIn] | None = None) -> Plan:
    """``_run_program`` from any thread, one program at a time, each on an event loop of its own:
    Pulumi's runtime needs a current loop, a front end's worker thread has none, and asking for
    the main thread's implicit one is deprecated (Python 3.12 warns, 3.14 raises). MOCKS: a
    pulumi.runtime.Mocks that answers instead (gemma4_t4.testing.ProviderMocks), INVOKES and STANDINS then
    unused; STANDINS: the clouds' answers to a create (mock_state)."""
    with _PROGRAM_LOCK:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        try:
            return _run_program(stack, config, plan, invokes or {}, program or _stack_program, mocks, standins or {})
        except KeyboardInterrupt:
            # Ctrl-C: the program's tasks end with it; asyncio would print each one's traceback
            # ("Task exception was never retrieved") when it is collected. The caller says it once.
            loop.set_exception_handler(lambda _loop, _context: None)
            raise
        finally:
            asyncio.set_event_loop(None)
            loop.close()


def _stack_program() -> None:
    runpy.run_module(PROGRAM, run_name="__main__")


def _run_program(stack: str, config: dict[str, Any], plan: Plan | None, invokes: Mapping[str, Invoke],
                 program: Callable[[], Any], answering: Any = None,
                 standins: Mapping[str, StateStandIn] | None = None) -> Plan:
    """Run PROGRAM (default: the stack program) under fresh mocks, recording into ``plan``. Raises
    whatever the program raises (a refused config raises ConfigError); ``plan`` then shows what had
    been registered by then."""
    import pulumi
    from pulumi.runtime import mocks, rpc, settings

    record = plan if plan is not None else Plan(stack)
    by_urn: dict[str, RegisteredResource] = {}

    # The name a resource registered with an alias to another name of the same parent is auto-named from: an
    # upgrade's engine matches the old resource by the alias, and the provider keeps its physical name (the bridge
    # reuses the old state's auto-name), so two plans compare as the deployments do.
    naming: dict[str, str] = {}

    class Mocks(pulumi.runtime.Mocks):
        def new_resource(self, args: pulumi.runtime.MockResourceArgs):
            if answering is not None:
                return answering.new_resource(args)
            name = naming.pop(args.name, args.name)
            return mock_state(args.typ, name, args.inputs, _suffix(stack, args.typ, name), standins)

        def call(self, args: pulumi.runtime.MockCallArgs):
            if answering is not None:
                return answering.call(args)
            # The providers' functions the program may call before anything exists: each one a
            # stand-in with its source. (Others answer empty, as an unknown token did before the
            # clouds gave their stand-ins; a component's call to one shows in its test.)
            handler = invokes.get(args.token)
            return handler(dict(args.args)) if handler is not None else {}

    class RecordingMonitor(mocks.MockMonitor):
        def make_urn(self, parent: str, type_: str, name: str) -> str:
            return engine_urn(parent, type_, name)

        def RegisterResource(self, request):
            renamed = [a["name"] for a in map(_alias, request.aliases) if set(a) == {"name"}]
            if renamed:
                naming[request.name] = renamed[0]
            response = super().RegisterResource(request)
            if request.type != "pulumi:pulumi:Stack":
                registered = self.resources[response.urn]
                state = {k: _jsonable(v) for k, v in registered.state.items()}
                inputs = {k: v for k, v in state.items() if k in _input_keys(request)}
                resource = RegisteredResource(request.type, request.name, response.urn, _parent(request.parent),
                                              bool(request.custom), inputs, _options(request), state)
                record.resources.append(resource)
                by_urn[response.urn] = resource
            return response

        def RegisterResourceOutputs(self, request):
            if request.urn in by_urn:
                outputs = rpc.deserialize_properties(request.outputs, keep_unknowns=True)
                by_urn[request.urn].registered_outputs = {k: _jsonable(v) for k, v in outputs.items()}
            return super().RegisterResourceOutputs(request)

    # The organization a DIY backend (a file or bucket state) gives every stack (Pulumi's reference of
    # automation.fullyQualifiedStackName: "org must be set to \"organization\""); Pulumi Cloud gives the user's.
    settings.reset_options(project=PROJECT, stack=stack, preview=False, organization=MOCK_ORGANIZATION)
    mock_impl = Mocks()
    mocks.set_mocks(mock_impl, project=PROJECT, stack=stack, preview=False, monitor=RecordingMonitor(mock_impl),
                    organization=MOCK_ORGANIZATION)
    pulumi.runtime.set_all_config({k: _as_config_string(v) for k, v in config.items()}, secret_keys(config))

    @mocks.test
    def run():
        program()
        root = settings.get_root_resource()
        assert root is not None and hasattr(root, "outputs"), "the program registered no stack"
        return pulumi.Output.all(**root.outputs).apply(record.outputs.update)

    run()
    return record


def _package_path(path: str) -> str:
    """A packaged file's path inside gemma4_t4 (turing/Dockerfile): the same in a checkout, where pyproject.toml's
    package-dir maps components/, cloudinit/ and turing/ into the package, as installed."""
    resolved = Path(path).resolve()
    for package in ("gemma4_t4.turing", "gemma4_t4.cloudinit", "gemma4_t4.components", "gemma4_t4"):
        spec = importlib.util.find_spec(package)
        root = Path(next(iter(spec.submodule_search_locations or ()))).resolve() if spec else None
        if root and resolved.is_relative_to(root):
            return Path(*package.split(".")[1:], resolved.relative_to(root)).as_posix()
    return path


def _jsonable(value: Any) -> Any:
    """Inputs as JSON: assets and archives by what they hold (a packaged file by its path in the
    package: turing/Dockerfile), secrets shown as placeholders."""
    import pulumi

    if isinstance(value, dict):
        if value.get(_SECRET_SIG) == _SECRET_MARK:
            return SECRET_PLACEHOLDER
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, pulumi.AssetArchive):
        return {"archive": {k: _jsonable(v) for k, v in sorted(value.assets.items())}}
    if isinstance(value, pulumi.FileAsset | pulumi.FileArchive):
        return {"file": _package_path(value.path)}
    if isinstance(value, pulumi.StringAsset):
        return {"text": value.text}
    return value


# How the wire format marks a secret value (pulumi.runtime.rpc).
_SECRET_SIG, _SECRET_MARK = "4dabf18193072939515e22adb298388d", "1b47061264138c4ac30d75fd1eb44270"


def _urn_label(urn: str) -> str:
    """`TYPE::NAME` of a URN (its own type, not the parent chain)."""
    _, _, qualified_type, name = urn.split("::", 3)
    return f"{qualified_type.split('$')[-1]}::{name}"


def _parent(urn: str) -> str | None:
    if not urn or _urn_label(urn).startswith(f"{ROOT_STACK}::"):
        return None
    return _urn_label(urn)


def _options(request) -> dict[str, Any]:
    return {
        "protect": request.protect if request.HasField("protect") else False,
        "retainOnDelete": request.retainOnDelete if request.HasField("retainOnDelete") else False,
        "deleteBeforeReplace": request.deleteBeforeReplace,
        "replaceOnChanges": list(request.replaceOnChanges),
        "dependsOn": sorted(_urn_label(u) for u in request.dependencies),
        "importId": request.importId,
        "parentUrn": request.parent,
        # As the SDK sends them (alias specs; the engine turns them into URNs, parents' included).
        "aliases": [_alias(alias) for alias in request.aliases],
    }


def _alias(alias) -> dict[str, Any]:
    if alias.urn:
        return {"urn": alias.urn}
    spec = alias.spec
    return {key: value for key, value in (("name", spec.name), ("type", spec.type), ("parentUrn", spec.parentUrn),
                                          ("noParent", spec.noParent)) if value}


def _input_keys(request) -> set[str]:
    return set(request.object.fields.keys()) if request.object else set()
