"""The offline plan: the real Pulumi program run under Pulumi's mocks, no CLI or cloud needed.

Config is assembled the way the Pulumi CLI would: Pulumi.yaml's defaults, then
Pulumi.<stack>.yaml, then each override as `pulumi config set [--path]` would apply it.
Every resource the program registers is recorded with its parent and its inputs as the
engine sees them (camelCase, numbers as floats).
"""

from __future__ import annotations

import json
import runpy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from components.errors import ConfigError

REPO = Path(__file__).resolve().parent.parent
PROJECT = "gemma4-t4"


# --- config ------------------------------------------------------------------------------------


def _qualify(key: str) -> str:
    return key if ":" in key else f"{PROJECT}:{key}"


def load_stack_config(stack: str, overrides: list[str] = (), repo: Path = REPO) -> dict[str, Any]:
    """{fully-qualified key: value} for STACK, as `pulumi up` would see it."""
    project = yaml.safe_load((repo / "Pulumi.yaml").read_text())
    config: dict[str, Any] = {}
    for key, spec in (project.get("config") or {}).items():
        if isinstance(spec, dict) and "default" in spec:
            config[_qualify(key)] = spec["default"]
    stack_file = repo / f"Pulumi.{stack}.yaml"
    if not stack_file.is_file():
        known = sorted(p.name[len("Pulumi."):-len(".yaml")] for p in repo.glob("Pulumi.*.yaml"))
        raise FileNotFoundError(f"no stack file {stack_file.name}; stacks here: {', '.join(known)}")
    for key, value in ((yaml.safe_load(stack_file.read_text()) or {}).get("config") or {}).items():
        config[_qualify(key)] = value
    for override in overrides:
        apply_override(config, override)
    return config


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
        node = json.loads(node)
    node = dict(node or {})
    config[full] = node
    for part in nested[:-1]:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise ConfigError(key, f"{part} is not an object", "set the whole value without --path")
    node[nested[-1]] = value


SECRET_PLACEHOLDER = "[secret]"


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

    def one(self, type_: str) -> RegisteredResource:
        found = self.find(type_)
        if len(found) != 1:
            raise AssertionError(f"expected one {type_}, found {[r.name for r in found]}")
        return found[0]

    def as_json(self) -> dict[str, Any]:
        return {
            "stack": self.stack,
            "resources": [r.as_json() for r in self.resources],
            "outputs": self.outputs,
            "cost_per_hour_usd": self.outputs.get("cost_per_hour_usd"),
        }


def _mock_state(typ: str, name: str, inputs: dict[str, Any]) -> dict[str, Any]:
    """Inputs plus the computed outputs the program reads, so no Output is left unknown."""
    physical = inputs.get("name") or name
    computed = {"stdout": "sha256:" + "0" * 64} if typ == "command:local:Command" else {}
    return {
        **computed,
        **inputs,
        "name": physical,
        "selfLink": f"https://mock.invalid/{typ}/{physical}",
        "arn": f"arn:aws:mock:::{physical}",
        "repositoryUrl": f"123456789012.dkr.ecr.mock.amazonaws.com/{physical}",
    }


def run_program(stack: str, config: dict[str, Any], plan: Plan | None = None,
                program: Path = REPO / "__main__.py") -> Plan:
    """Run the Pulumi program under fresh mocks, recording into ``plan``. Raises whatever the
    program raises (a refused config raises ConfigError); ``plan`` then shows what had been
    registered by then."""
    import pulumi
    from pulumi.runtime import mocks, settings

    plan = plan if plan is not None else Plan(stack)

    class Mocks(pulumi.runtime.Mocks):
        def new_resource(self, args: pulumi.runtime.MockResourceArgs):
            return f"{args.name}-id", _mock_state(args.typ, args.name, args.inputs)

        def call(self, args: pulumi.runtime.MockCallArgs):
            return {}

    class RecordingMonitor(mocks.MockMonitor):
        def RegisterResource(self, request):
            response = super().RegisterResource(request)
            if request.type != "pulumi:pulumi:Stack":
                registered = self.resources[response.urn]
                inputs = {k: _jsonable(v) for k, v in registered.state.items() if k in _input_keys(request)}
                plan.resources.append(RegisteredResource(
                    request.type, request.name, response.urn, _parent(request.parent),
                    bool(request.custom), inputs, _options(request)))
            return response

    settings.reset_options(project=PROJECT, stack=stack, preview=False)
    mock_impl = Mocks()
    mocks.set_mocks(mock_impl, project=PROJECT, stack=stack, preview=False, monitor=RecordingMonitor(mock_impl))
    pulumi.runtime.set_all_config({k: _as_config_string(v) for k, v in config.items()}, secret_keys(config))

    @mocks.test
    def run():
        runpy.run_path(str(program), run_name="__main__")
        root = settings.get_root_resource()
        return pulumi.Output.all(**root.outputs).apply(plan.outputs.update)

    run()
    return plan


def _jsonable(value: Any) -> Any:
    """Inputs as JSON: assets and archives by what they hold, secrets shown as placeholders."""
    import pulumi

    if isinstance(value, dict):
        if value.get(_SECRET_SIG) == _SECRET_MARK:
            return SECRET_PLACEHOLDER
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, pulumi.AssetArchive):
        return {"archive": {k: _jsonable(v) for k, v in sorted(value.assets.items())}}
    if isinstance(value, (pulumi.FileAsset, pulumi.FileArchive)):
        return {"file": str(Path(value.path).resolve().relative_to(REPO))}
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
    if not urn or _urn_label(urn).startswith("pulumi:pulumi:Stack::"):
        return None
    return _urn_label(urn)


def _options(request) -> dict[str, Any]:
    return {
        "protect": request.protect if request.HasField("protect") else False,
        "retainOnDelete": request.retainOnDelete if request.HasField("retainOnDelete") else False,
        "deleteBeforeReplace": request.deleteBeforeReplace,
        "replaceOnChanges": list(request.replaceOnChanges),
        "dependsOn": sorted(_urn_label(u) for u in request.dependencies),
    }


def _input_keys(request) -> set[str]:
    return set(request.object.fields.keys()) if request.object else set()


# --- presentation ------------------------------------------------------------------------------


def _short(value: Any) -> str:
    text = json.dumps(value, sort_keys=True) if not isinstance(value, str) else value
    return text if len(text) <= 100 else f"<{len(text)} chars>"


def format_plan(plan: Plan) -> str:
    lines = [f"stack {plan.stack}: {len(plan.resources)} resources"]
    for r in plan.resources:
        parent = f"  (in {r.parent})" if r.parent else ""
        lines.append(f"+ {r.type}  {r.name}{parent}")
        for key in sorted(r.inputs):
            lines.append(f"      {key}: {_short(r.inputs[key])}")
        kept = [k for k in ("protect", "retainOnDelete", "deleteBeforeReplace") if r.options.get(k)]
        if kept:
            lines.append(f"      options: {', '.join(kept)}")
    lines.append("outputs:")
    lines += [f"  {k}: {_short(v)}" for k, v in sorted(plan.outputs.items())]
    cost = plan.outputs.get("cost_per_hour_usd")
    if cost is not None:
        lines.append(f"estimated cost while running: ${cost:.4f}/h (catalog list prices; the bill is the truth)")
    return "\n".join(lines)


def user_data(plan: Plan) -> str | None:
    for r in plan.find("gcp:compute/instance:Instance"):
        return (r.inputs.get("metadata") or {}).get("user-data")
    return None
