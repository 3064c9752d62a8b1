"""The stack config, read once and checked whole before any resource is registered.

``stack_settings`` takes the `gemma4-t4:*` keys as Pulumi hands them to the program (strings, with
Pulumi.yaml's defaults merged in) and returns the cloud and its Settings. A bad value, a key this
project does not have, or another cloud's key set on this stack raises ConfigError: the key as the
user types it, what is wrong, and the `pulumi config` command that fixes it.

``project_config`` is Pulumi.yaml's `config:` section as the Settings and the Args' documentation say
it; ``python -m gemma4_t4.clouds.stack_config`` prints it (a test holds the two equal).
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import ValidationError

from ..components.config import ServingSettings, closest_setting, keys_of, to_config_error
from ..errors import PROJECT, ConfigError, Set, Unset
from .base import Cloud

# Keys the stack config has beyond the components' settings: which component to build.
CLOUD_KEY = "cloud"
CLOUD_DESCRIPTION = "Which component the stack builds: gce (a VM with T4s) or sagemaker (an endpoint)"
DEFAULT_CLOUD = "gce"
# Component settings the stack program sets for itself rather than from the stack config.
PROGRAM_SET = {"namePrefix", "project", "network", "subnetwork", "region", "profile", "executionRoleArn",
               "imageBuildEnvironment"}
# Where the stack program's defaults differ from the components': it may ask the Hub (a user's own
# program under unit tests must not).
PROGRAM_DEFAULTS = {"sizeFromHub": True}
SECRET_KEYS = ("hfToken", "apiKey")
# Keys this project had, and the key that does their work now.
RENAMED = {"gpuCount": ("tensorParallelSize", "the VM gets one T4 per rank, and the shape that takes them")}


def config_keys(model: type[ServingSettings]) -> dict[str, Any]:
    """{key as the user types it: its stack default} of one cloud's settings."""
    return {key: PROGRAM_DEFAULTS.get(key, default) for key, default in keys_of(model).items()
            if key not in PROGRAM_SET}


def all_keys(clouds: Mapping[str, Cloud]) -> dict[str, Any]:
    keys: dict[str, Any] = {CLOUD_KEY: DEFAULT_CLOUD}
    for cloud in clouds.values():
        keys.update(config_keys(cloud.settings))
    return keys


def _as_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    return str(value)


def _refuse_unknown(keys: Mapping[str, Any], clouds: Mapping[str, Cloud]) -> None:
    known = all_keys(clouds)
    for key in keys:
        if key in known:
            continue
        if key in RENAMED:
            new, why = RENAMED[key]
            raise ConfigError(key, f"is now {new}: {why}", (Unset(key), " && ", Set(new, "N")))
        close = closest_setting(key, known)  # maxmodellen and max_model_len alike: maxModelLen
        hint = f"; did you mean {close}?" if close else ""
        fix = (Unset(key), " && ", Set(close)) if close else (Unset(key), " (the keys are listed in Pulumi.yaml)")
        raise ConfigError(key, f"is not a setting of this project{hint}", fix)


def _refuse_other_cloud(keys: Mapping[str, Any], cloud: Cloud, clouds: Mapping[str, Cloud]) -> None:
    mine = config_keys(cloud.settings)
    for other in clouds.values():
        if other is cloud:
            continue
        for key, default in config_keys(other.settings).items():
            if key in mine or key not in keys or _as_text(keys[key]).strip() == _as_text(default):
                continue
            instead = f"; on {cloud.name} use {cloud.counterparts[key]}" if key in cloud.counterparts else ""
            raise ConfigError(key, f"is a {other.name} setting, and this stack builds {cloud.name}: it would be "
                              f"ignored{instead}", Unset(key))


def _refuse_plain_secrets(keys: Mapping[str, Any], secret_keys: set[str], cloud: Cloud) -> None:
    for key in SECRET_KEYS:
        if _as_text(keys.get(key)) and f"{PROJECT}:{key}" not in secret_keys:
            if key in config_keys(cloud.settings):
                fix: tuple[Any, ...] = (Unset(key), " && ", Set(key, secret=True))
            else:  # this cloud does not take it at all: setting it as a secret would be refused next
                fix = (Unset(key), f" (a {cloud.name} stack uses {cloud.counterparts.get(key, 'nothing')})")
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


def stack_settings(config: Mapping[str, Any], clouds: Mapping[str, Cloud],
                   secret_keys: set[str] | frozenset[str] = frozenset(),
                   secret: Callable[[str], Any] | None = None) -> tuple[Cloud, dict[str, Any]]:
    """The stack's cloud and its component's Args, checked ({"gemma4-t4:key": value, "aws:region": ...}).

    ``secret(key)`` returns a secret key's value as Pulumi gives it (an Output); only called for a secret
    that is set. The Args hold what the stack config sets (Python names), the program's defaults, and the
    provider's settings (region, credentials: a Secret where a credential)."""
    prefix = f"{PROJECT}:"
    _refuse_stray_namespaces(config)
    keys = {k[len(prefix):]: v for k, v in config.items() if k.startswith(prefix)}
    _refuse_unknown(keys, clouds)
    name = _as_text(keys.get(CLOUD_KEY, DEFAULT_CLOUD))
    if name not in clouds:
        others = " or ".join(c for c in clouds if c != DEFAULT_CLOUD)
        raise ConfigError(CLOUD_KEY, f"unknown cloud {name!r}", (Set(CLOUD_KEY, DEFAULT_CLOUD), f" (or {others})"))
    cloud = clouds[name]
    _refuse_plain_secrets(keys, set(secret_keys), cloud)
    _refuse_other_cloud(keys, cloud, clouds)
    mine = config_keys(cloud.settings)
    values: dict[str, Any] = {**{k: v for k, v in PROGRAM_DEFAULTS.items() if k in mine},
                              **{k: v for k, v in keys.items() if k in mine}}
    for key in SECRET_KEYS:
        if key in values:
            values[key] = secret(key) if _as_text(values[key]) and secret is not None else None
    values.update(cloud.provider_args(config))
    try:
        settings = cloud.settings.model_validate(values)
    except ValidationError as err:
        raise to_config_error(err, cloud.settings) from None
    names = {field.alias or name: name for name, field in cloud.settings.model_fields.items()}
    given = [names.get(key, key) for key in values]  # the config's keys, and the provider's Python names
    return cloud, {name: getattr(settings, name) for name in given}


# --- Pulumi.yaml -------------------------------------------------------------------------------------


def stack_defaults(clouds: Mapping[str, Cloud]) -> dict[str, Any]:
    """{key: default} as Pulumi.yaml's `config:` section states them (what `pulumi up` merges in)."""
    return {key: _plain(default) for key, default in all_keys(clouds).items()}


def _yaml_type(default: Any) -> str | None:
    if isinstance(default, bool):
        return "boolean"
    if isinstance(default, int):
        return "integer"
    if isinstance(default, dict):
        return None  # an object: Pulumi.yaml's config types have no name for it
    return "string"


def _plain(default: Any) -> Any:
    if isinstance(default, float):
        return str(default)  # Pulumi.yaml has no number type
    if default is None:
        return ""
    return getattr(default, "value", default)  # an enum: its value


def project_config(clouds: Mapping[str, Cloud], descriptions: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    """Pulumi.yaml's `config:` section: every key with its type, default and description (DESCRIPTIONS: the
    components' Args documentation, by key)."""
    section: dict[str, dict[str, Any]] = {CLOUD_KEY: {"type": "string", "default": DEFAULT_CLOUD,
                                                      "description": CLOUD_DESCRIPTION}}
    for cloud in clouds.values():
        for key, default in config_keys(cloud.settings).items():
            if key in section:
                continue
            entry: dict[str, Any] = {}
            if (kind := _yaml_type(default)) is not None:
                entry["type"] = kind
            entry["default"] = _plain(default)  # as stack_defaults states it
            entry["description"] = descriptions[key]
            section[key] = entry
    return section


def print_section(section: Mapping[str, Mapping[str, Any]], groups: list[tuple[str, list[str]]]) -> None:
    """The section as Pulumi.yaml lays it out: one key a line in flow style, in GROUPS."""
    print("config:")
    for number, (title, keys) in enumerate(groups):
        print(("\n" if number else "") + f"  # {title}")
        for key in keys:
            spec = section[key]
            parts = [f"{name}: {spec[name] if name == 'type' else json.dumps(spec[name])}"
                     for name in ("type", "default", "description") if name in spec]
            print(f"  {key}: {{{', '.join(parts)}}}")
