"""The offline plan: the real stack program (gemma4_t4.program, which the project's __main__.py
runs) under Pulumi's mocks, no CLI or cloud needed, from a checkout or an installed wheel.

Config is assembled the way the Pulumi CLI would: Pulumi.yaml's defaults, then
Pulumi.<stack>.yaml, then each override as `pulumi config set [--path]` would apply it.
Every resource the program registers is recorded with its parent, its inputs as the engine
sees them (camelCase, numbers as floats) and the aliases it declares.

Lookups the program makes (invokes) are answered by the handlers the caller passes (each cloud's
stand-in for its provider's functions, given what already exists: gemma4_t4.clouds). The offline
`plan` command passes an empty world, i.e. it shows a first `pulumi up` in an empty project.
"""

from __future__ import annotations

import asyncio
import difflib
import hashlib
import importlib.util
import json
import runpy
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import yaml

from .. import catalog
from ..errors import PROJECT, UNDECRYPTED_SECRET, ConfigError, UsageError
from .cost import CostEstimate

# The stack program, by module name: run as Pulumi runs a program, never imported by the core.
PROGRAM = "gemma4_t4.program"
# A provider function's stand-in: its arguments -> its result (or a ProviderInvokeError).
Invoke = Callable[[dict[str, Any]], dict[str, Any]]


def read_yaml(path: Path) -> dict[str, Any]:
    """A Pulumi project or stack file as a mapping; one that is not YAML, or not a mapping, is the user's to
    fix (UsageError naming the file and the line), not a bug."""
    try:
        document = yaml.safe_load(path.read_text())
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark is not None else "somewhere"
        raise UsageError(f"{path}: not valid YAML at {where}: {err.problem or err.context}") from None
    except yaml.YAMLError as err:
        raise UsageError(f"{path}: not valid YAML: {err}") from None
    if document is None:
        return {}
    if not isinstance(document, dict):
        raise UsageError(f"{path}: holds a {type(document).__name__}, not Pulumi's mapping of keys (name:, config:)")
    return document


def find_project(start: Path | None = None) -> Path:
    """The gemma4-t4 Pulumi project at or above ``start`` (default: the working directory),
    as the Pulumi CLI finds Pulumi.yaml."""
    start = (start or Path.cwd()).resolve()
    for directory in (start, *start.parents):
        project_file = directory / "Pulumi.yaml"
        if project_file.is_file() and read_yaml(project_file).get("name") == PROJECT:
            return directory
    raise FileNotFoundError(f"no {PROJECT} Pulumi project (Pulumi.yaml) at or above {start}: "
                            "run this from the project's directory, or pass --project-dir")


# --- config ------------------------------------------------------------------------------------


def _qualify(key: str) -> str:
    """gemma4-t4:KEY for a bare key. A ':' after a dot is part of a path (labels.aws:owner: the tag
    aws:owner), not a namespace."""
    return key if ":" in key.split(".", 1)[0] else f"{PROJECT}:{key}"


def load_stack_config(stack: str, overrides: Sequence[str] = (), repo: Path | None = None) -> dict[str, Any]:
    """{fully-qualified key: value} for STACK, as `pulumi up` would see it."""
    repo = repo or find_project()
    project = read_yaml(repo / "Pulumi.yaml")
    config: dict[str, Any] = {}
    for key, spec in (project.get("config") or {}).items():
        if isinstance(spec, dict) and "default" in spec:
            config[_qualify(key)] = spec["default"]
    stack_file = repo / f"Pulumi.{stack}.yaml"
    if not stack_file.is_file():
        known = sorted(p.name[len("Pulumi."):-len(".yaml")] for p in repo.glob("Pulumi.*.yaml"))
        raise FileNotFoundError(f"no stack file {stack_file.name}; stacks here: {', '.join(known)}")
    document = read_yaml(stack_file)
    for line in stack_file_warnings(stack_file, document):
        sys.stderr.write(f"warning: {line}\n")
    stack_config = document.get("config") or {}
    if not isinstance(stack_config, dict):
        raise UsageError(f"{stack_file}: its config: is a {type(stack_config).__name__}, not a mapping of keys to "
                         "values: write each setting under config: as `gemma4-t4:KEY: VALUE`, one a line (as "
                         "`pulumi config set gemma4-t4:KEY VALUE` writes it)")
    for key, value in stack_config.items():
        config[_qualify(key)] = value
    for override in overrides:
        apply_override(config, override)
    return config


# The top-level keys of a stack file, as the Pulumi CLI reads it (pulumi/pulumi sdk/go/common/workspace/project.go,
# ProjectStack: secretsprovider, encryptedkey, encryptionsalt, config, environment); it ignores any other, silently.
STACK_FILE_KEYS = ("secretsprovider", "encryptedkey", "encryptionsalt", "config", "environment")


def stack_file_warnings(path: Path, document: dict[str, Any]) -> list[str]:
    """One line for each top-level key of the stack file at PATH that Pulumi does not read (a mistyped `conifg:`
    would leave every setting under it out, and the defaults planned), with the fix."""
    lines = []
    for key in document:
        if key in STACK_FILE_KEYS:
            continue
        close = difflib.get_close_matches(str(key).lower(), STACK_FILE_KEYS, n=1, cutoff=0.6)
        held = document[key]
        what = (f"its {len(held)} settings are ignored (this plan has the defaults in their place)"
                if isinstance(held, dict) and held else "it is ignored")
        fix = (f"did you mean {close[0]}:? rename it" if close else
               f"remove it, or move its settings under config: (Pulumi reads only {', '.join(STACK_FILE_KEYS)})")
        lines.append(f"{path.name}: top-level key {str(key)!r} is not one Pulumi reads, so {what}; {fix}")
    return lines


def apply_override(config: dict[str, Any], override: str) -> None:
    """KEY=VALUE as `pulumi config set KEY VALUE`; KEY.a.b=VALUE as `pulumi config set --path`."""
    key, sep, value = override.partition("=")
    if not sep or not key:
        raise ConfigError(override, "is not KEY=VALUE", "pass --config gemma4-t4:KEY=VALUE")
    namespace, _, path = _qualify(key).partition(":")
    name, *nested = path.split(".")
    full = f"{namespace}:{name}"
    if not nested:
        config[full] = value
        return
    node = config.get(full)
    if isinstance(node, str):
        try:
            node = json.loads(node) if node.strip() else {}
        except json.JSONDecodeError:
            node = None
    if node is not None and not isinstance(node, dict):
        raise ConfigError(f"{namespace}:{name}", f"is not an object, so {key} cannot set a part of it",
                          f"set the whole value: pulumi config set {namespace}:{name} VALUE")
    node = dict(node or {})
    config[full] = node
    for part in nested[:-1]:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise ConfigError(key, f"{part} is not an object", "set the whole value without --path")
    node[nested[-1]] = value


SECRET_PLACEHOLDER = UNDECRYPTED_SECRET


def secret_keys(config: dict[str, Any]) -> list[str]:
    """Keys whose stack-file value is `secure:` ciphertext: secrets the plan cannot decrypt."""
    return [key for key, value in config.items() if isinstance(value, dict) and set(value) == {"secure"}]


def _as_config_string(value: Any) -> str:
    if isinstance(value, dict) and set(value) == {"secure"}:
        return SECRET_PLACEHOLDER
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return json.dumps(value)
    return str(value)


# --- the run -----------------------------------------------------------------------------------


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


# --- presentation ------------------------------------------------------------------------------


def cost_range(plan: Plan) -> list[float] | None:
    """[fewest, most] $/h: an autoscaled endpoint's range (cost_per_hour_usd_max), else one price twice
    (the same figures `gemma4-t4 cost` shows: CostEstimate.from_outputs)."""
    return CostEstimate.from_outputs(plan.stack, plan.outputs).running_usd_per_hour_range


def cost_line(plan: Plan, *, spot: bool) -> str | None:
    """The running cost in one line; SPOT: the server is on Spot capacity (its cloud's Cloud.is_spot)."""
    span = cost_range(plan)
    if span is None:
        if "cost_per_hour_usd" in plan.outputs:  # the stack says it, and the catalog has no price: unknown, not $0
            return ("estimated cost while running: unknown (the catalog lacks a list price here; "
                    f"`gemma4-t4 cost {plan.stack}`, with the same --config, shows which)")
        return None
    low, high = span
    shown = f"${low:.4f}/h" if low == high else f"${low:.4f}/h to ${high:.4f}/h, fewest to most instances"
    prices = "catalog Spot list prices" if spot else "catalog list prices"
    return f"estimated cost while running: {shown} ({prices}; the bill is the truth)"


def guard_lines(plan: Plan) -> list[str]:
    """The stack's cost guards (its `cost_guards` output): each with its value, or off with what that can cost
    per day; none for a stack without the output."""
    guards = plan.outputs.get("cost_guards") or []
    if not guards:
        return []
    lines = ["cost guards (what stops a forgotten stack's bill):"]
    for guard in guards:
        if guard["on"]:
            lines.append(f"  {guard['key']} {guard['value']}: {guard['effect']}")
            continue
        per_day = guard.get("off_usd_per_day")
        cost = f"${per_day:,.2f}/day" if per_day is not None else "an unknown amount per day (no catalog price)"
        lines.append(f"  {guard['key']} OFF: {guard['effect']}; can bill {cost}")
    return lines


def memory_line(plan: Plan) -> str | None:
    """The stack's memory plan in vLLM's own terms (the `memory_plan` output), or None."""
    m = plan.outputs.get("memory_plan")
    if not m:
        return None
    size = m.get("tensor_parallel_size", 1)
    where = m["gpu"] if size == 1 else f"each of {size} {m['gpu']}s"
    return (f"memory plan ({where}): {m['gpu_memory_utilization']} x {m['gpu_total_gib']} GiB = {m['budget_gib']} "
            f"GiB for vLLM - weights {m['weights_gib']} GiB - overheads {m['overhead_gib']} GiB = KV cache "
            f"{m['kv_cache_gib']} GiB: {m['kv_cache_tokens']:,} tokens, {m['max_concurrency']}x "
            f"{m['max_model_len']:,}-token requests at once")


def revision_line(plan: Plan) -> str | None:
    """Which revision of the model vLLM downloads (the `model_revision` output); None when nothing is downloaded
    (a checkpoint directory on the server) or the stack has no such output."""
    revision = plan.outputs.get("model_revision")
    if revision is None:
        return None
    if not revision and plan.outputs.get("served_model_name") == catalog.DEFAULT_MODEL:
        return (f"model revision: the Hub's main of the default model {catalog.DEFAULT_MODEL} (no source the catalog "
                "cites gives a commit for it; set modelRevision to a commit to pin it)")
    if not revision:
        return "model revision: not pinned: the Hub's main may change under the stack; set modelRevision to a commit"
    if catalog.HUB_COMMIT.fullmatch(revision):
        return f"model revision: {revision} (a Hub commit)"
    return f"model revision: {revision} (a branch or tag, which can move; set modelRevision to a commit to pin it)"


# --- what a change does to what is deployed -----------------------------------------------------------------


@dataclass(frozen=True)
class Change:
    """What `pulumi up` does to one resource when the stack goes from one plan to another."""

    label: str  # TYPE::NAME
    action: str  # "create", "delete", "update in place", "replace", or "change" (a type the cloud says nothing of)
    keys: tuple[str, ...]  # the inputs that differ; for a replacement, those that force it
    note: str = ""  # what a replacement costs, as the cloud says it

    def line(self) -> str:
        keys = f" ({', '.join(self.keys)})" if self.keys else ""
        return f"{self.label}: {self.action}{keys}" + (f": {self.note}" if self.note else "")


def changes(before: Plan, after: Plan, replaced_by: Mapping[str, tuple[tuple[str, ...], str]]) -> list[Change]:
    """Each resource AFTER creates, deletes, updates or replaces against BEFORE, by URN. REPLACED_BY: the inputs a
    type's provider replaces it for, with what that costs ({type: (keys, note)}); a resource's own
    replaceOnChanges counts too."""
    olds = {r.urn: r for r in before.resources}
    news = {r.urn: r for r in after.resources}
    found: list[Change] = [Change(r.label, "delete", ()) for urn, r in olds.items() if urn not in news]
    for urn, new in news.items():
        old = olds.get(urn)
        if old is None:
            found.append(Change(new.label, "create", ()))
            continue
        differ = sorted(k for k in old.inputs.keys() | new.inputs.keys() if _canonical(old.inputs.get(k))
                        != _canonical(new.inputs.get(k)))
        if not differ:
            continue
        keys, note = replaced_by.get(new.type, ((), ""))
        keys = (*keys, *(new.options.get("replaceOnChanges") or ()))
        forcing = tuple(k for k in keys if k.split(".", 1)[0] in differ and _at(old.inputs, k) != _at(new.inputs, k))
        in_place = "update in place" if new.type in replaced_by else "change"
        found.append(Change(new.label, "replace", forcing, note) if forcing else Change(new.label, in_place,
                                                                                       tuple(differ)))
    return found


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _at(inputs: Mapping[str, Any], dotted: str) -> str:
    """The canonical value at DOTTED (a key, or KEY.KEY... into mappings) of INPUTS; absent is null."""
    value: Any = inputs
    for key in dotted.split("."):
        value = value.get(key) if isinstance(value, Mapping) else None
    return _canonical(value)
