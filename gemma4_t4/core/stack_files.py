"""The project's and a stack's files, and a stack's config as the Pulumi CLI assembles it: Pulumi.yaml's defaults,
then Pulumi.<stack>.yaml, then each override as `pulumi config set [--path]` would apply it."""

from __future__ import annotations

import difflib
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from ..errors import PROJECT, ConfigError, UsageError


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


def secret_keys(config: dict[str, Any]) -> list[str]:
    """Keys whose stack-file value is `secure:` ciphertext: secrets the plan cannot decrypt."""
    return [key for key, value in config.items() if isinstance(value, dict) and set(value) == {"secure"}]
