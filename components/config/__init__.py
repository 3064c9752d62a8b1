"""The stack config, read once and checked whole: every key typed, ranged and cross-checked
against the catalog's cloud facts, before any resource is registered.

``load_args`` takes the `gemma4-t4:*` keys as Pulumi hands them to the program (strings, with
Pulumi.yaml's defaults merged in) and returns the one Args object of the stack's component. A
bad value, a key this project does not have, or another cloud's key set on this stack raises
ConfigError: the key as the user types it, what is wrong, and the `pulumi config` command that
fixes it. Never a traceback.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import BaseModel, ValidationError

from gemma4_t4.errors import PROJECT, ConfigError

from .schema import GceT4ServerArgs, SageMakerT4EndpointArgs, StackArgs, set_cmd

Args = GceT4ServerArgs | SageMakerT4EndpointArgs
COMPONENT_ARGS: dict[str, type[StackArgs]] = {"gce": GceT4ServerArgs, "sagemaker": SageMakerT4EndpointArgs}
SECRET_KEYS = ("hfToken",)
# Keys that come from outside the project's namespace.
NOT_CONFIG_KEYS = {"region"}
# What to use instead when a key of the other cloud is set, for the refusal's reason.
COUNTERPART = {
    "endpointTtl": "maxRunHours (GCE stops the VM) or idleStopMinutes",
    "maxRunHours": "endpointTtl (EventBridge Scheduler deletes the endpoint)",
    "idleStopMinutes": "endpointTtl (EventBridge Scheduler deletes the endpoint)",
    "spot": "nothing: SageMaker endpoints have no spot capacity",
    "instanceType": "machineType",
    "machineType": "instanceType",
    "hfToken": "nothing: the GCE guest passes no token to vLLM (a token in instance metadata is readable by "
               "anyone who may view the VM), and Gemma 4 is not gated",
    **{key: "nothing: a GCE stack is one VM (the README's \"Scaling the GCE stack out\" says why)"
       for key in ("minInstanceCount", "maxInstanceCount", "scalingMetric", "scalingTarget")},
}
# Keys this project had, and the key that does their work now.
RENAMED = {"gpuCount": ("tensorParallelSize", "the VM gets one T4 per rank, and the shape that takes them")}


def keys_of(model: type[BaseModel]) -> dict[str, Any]:
    """{key as the user types it: its default} for one Args class."""
    return {field.alias or name: field.get_default(call_default_factory=True)
            for name, field in model.model_fields.items() if name not in NOT_CONFIG_KEYS}


def all_keys() -> dict[str, Any]:
    return {**keys_of(GceT4ServerArgs), **keys_of(SageMakerT4EndpointArgs)}


def _as_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    return str(value)


def _refuse_unknown(keys: Mapping[str, Any]) -> None:
    known = all_keys()
    for key in keys:
        if key in known:
            continue
        if key in RENAMED:
            new, why = RENAMED[key]
            raise ConfigError(key, f"is now {new}: {why}",
                              f"pulumi config rm {PROJECT}:{key} && pulumi config set {PROJECT}:{new} N")
        match = next((k for k in known if k.lower() == key.lower()), None)
        close = [match] if match else difflib.get_close_matches(key, list(known), n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]}?" if close else ""
        fix = f"pulumi config rm {PROJECT}:{key}" + (f" && pulumi config set {PROJECT}:{close[0]} VALUE" if close
                                                     else " (the keys are listed in Pulumi.yaml)")
        raise ConfigError(key, f"is not a setting of this project{hint}", fix)


def _refuse_other_cloud(keys: Mapping[str, Any], cloud: str) -> None:
    mine = keys_of(COMPONENT_ARGS[cloud])
    for other_cloud, model in COMPONENT_ARGS.items():
        if other_cloud == cloud:
            continue
        for key, default in keys_of(model).items():
            if key in mine or key not in keys or _as_text(keys[key]).strip() == _as_text(default):
                continue
            instead = f"; on {cloud} use {COUNTERPART[key]}" if key in COUNTERPART else ""
            raise ConfigError(key, f"is a {other_cloud} setting, and this stack builds {cloud}: it would be "
                              f"ignored{instead}", f"pulumi config rm {PROJECT}:{key}")


def _refuse_plain_secrets(keys: Mapping[str, Any], secret_keys: set[str], cloud: str) -> None:
    for key in SECRET_KEYS:
        if _as_text(keys.get(key)) and f"{PROJECT}:{key}" not in secret_keys:
            if key in keys_of(COMPONENT_ARGS[cloud]):
                fix = f"pulumi config rm {PROJECT}:{key} && pulumi config set --secret {PROJECT}:{key} VALUE"
            else:  # this cloud does not take it at all: setting it as a secret would be refused next
                fix = f"pulumi config rm {PROJECT}:{key} (a {cloud} stack uses {COUNTERPART.get(key, 'nothing')})"
            raise ConfigError(key, "is stored in plain text in the stack file", fix)


def _refuse_stray_namespaces(config: Mapping[str, Any]) -> None:
    """A key whose namespace is a misspelling of the project's, or holds a dot (`labels.aws:owner`
    reads as the namespace `labels.aws`), reaches no setting: Pulumi would hand it to nobody."""
    for key in config:
        namespace, sep, name = key.partition(":")
        if not sep or namespace == PROJECT:
            continue
        if "." in namespace:
            raise ConfigError(key, f"reads as the namespace {namespace!r}, so it sets nothing",
                              f"pulumi config rm {key} && pulumi config set --path '{PROJECT}:{key}' VALUE")
        if difflib.get_close_matches(namespace.lower(), [PROJECT], n=1, cutoff=0.75):
            raise ConfigError(key, f"is in the namespace {namespace!r}, not this project's {PROJECT!r}, so it "
                              "sets nothing", f"pulumi config rm {key} && pulumi config set {PROJECT}:{name} VALUE")


def _suggestion(model: type[StackArgs], key: str, error: Mapping[str, Any]) -> Any:
    """A value that works: an integer's upper limit when it is above it (a cloud's limit), else
    the project's default."""
    ctx = error.get("ctx") or {}
    if isinstance(ctx.get("le"), int) and not isinstance(ctx["le"], bool):
        return ctx["le"]
    field = next((f for n, f in model.model_fields.items() if (f.alias or n) == key), None)
    return field.get_default(call_default_factory=True) if field is not None else "VALUE"


def to_config_error(err: ValidationError, model: type[StackArgs]) -> ConfigError:
    """The first error as the project's refusal (a ConfigError raised by a validator as it is)."""
    first = err.errors(include_url=False)[0]
    cause = (first.get("ctx") or {}).get("error")
    if isinstance(cause, ConfigError):
        return cause
    loc = [str(part) for part in first["loc"]]
    key = ".".join(loc) if loc else "?"
    message = str(first["msg"]).removeprefix("Value error, ")
    shown = repr(first["input"])
    shown = shown if len(shown) <= 60 else f"{shown[:50]}... ({len(str(first['input'])):,} characters)"
    problem = f"{shown}: {message[:1].lower()}{message[1:]}" if loc else message
    if loc and loc[0] == "labels":
        return ConfigError(key, problem, f"pulumi config set --path {PROJECT}:labels.NAME VALUE")
    fix = set_cmd(key, _suggestion(model, key, first))
    if first["type"] == "literal_error":
        fix += f" (one of {first['ctx']['expected']})"
    return ConfigError(key, problem, fix)


def load_args(config: Mapping[str, Any], secret_keys: set[str] | frozenset[str] = frozenset(),
              secret: Callable[[str], Any] | None = None) -> Args:
    """The stack's Args from its config ({"gemma4-t4:key": value, "aws:region": ...}).

    ``secret(key)`` returns a secret key's value as Pulumi gives it (an Output); only called for
    a secret that is set.
    """
    prefix = f"{PROJECT}:"
    _refuse_stray_namespaces(config)
    keys = {k[len(prefix):]: v for k, v in config.items() if k.startswith(prefix)}
    _refuse_unknown(keys)
    cloud = _as_text(keys.get("cloud", "gce"))
    if cloud not in COMPONENT_ARGS:
        raise ConfigError("cloud", f"unknown cloud {cloud!r}", f"{set_cmd('cloud', 'gce')} (or sagemaker)")
    _refuse_plain_secrets(keys, set(secret_keys), cloud)
    _refuse_other_cloud(keys, cloud)
    model = COMPONENT_ARGS[cloud]
    values: dict[str, Any] = {k: v for k, v in keys.items() if k in keys_of(model)}
    for key in SECRET_KEYS:
        if key in values:
            values[key] = secret(key) if _as_text(values[key]) and secret is not None else None
    if cloud == "sagemaker":
        region = config.get("aws:region")
        if not region:
            raise ConfigError("aws:region", "is not set", "pulumi config set aws:region us-east-2")
        values["region"] = region
    try:
        return model.model_validate(values)  # type: ignore[return-value]
    except ValidationError as err:
        raise to_config_error(err, model) from None


def read_pulumi_config() -> tuple[dict[str, Any], set[str]]:
    """Every config value the Pulumi engine handed this program, and which keys are secrets."""
    import pulumi
    from pulumi.runtime import config as runtime

    values = {**runtime.get_config_env(), **runtime.CONFIG.get()}
    return values, {k for k in values if pulumi.runtime.is_config_secret(k)}


def stack_args() -> Args:
    """The running stack's Args (the Pulumi program's entry point)."""
    import pulumi

    values, secrets = read_pulumi_config()
    return load_args(values, secrets, secret=lambda key: pulumi.Config(PROJECT).get_secret(key))


__all__ = ["COMPONENT_ARGS", "Args", "GceT4ServerArgs", "SageMakerT4EndpointArgs", "StackArgs", "all_keys",
           "keys_of", "load_args", "set_cmd", "stack_args", "to_config_error"]


def _yaml_type(default: Any) -> str | None:
    if isinstance(default, bool):
        return "boolean"
    if isinstance(default, int):
        return "integer"
    if isinstance(default, dict):
        return None  # an object: Pulumi.yaml's config types have no name for it
    return "string"


def project_config() -> dict[str, dict[str, Any]]:
    """Pulumi.yaml's `config:` section as the schema says it: every key with its type, default
    and description (floats as strings: Pulumi.yaml has no number type)."""
    section: dict[str, dict[str, Any]] = {}
    models: list[type[StackArgs]] = [StackArgs, *COMPONENT_ARGS.values()]
    for model in models:
        for name, field in model.model_fields.items():
            key = field.alias or name
            if name in NOT_CONFIG_KEYS or key in section:
                continue
            default = field.get_default(call_default_factory=True)
            entry: dict[str, Any] = {}
            if (kind := _yaml_type(default)) is not None:
                entry["type"] = kind
            entry["default"] = str(default) if isinstance(default, float) else ("" if default is None else default)
            entry["description"] = field.description
            section[key] = entry
    return section
