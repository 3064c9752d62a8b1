"""Pulumi.yaml's `config:` section, made from the components' Settings (types, defaults) and their Args'
documentation (the package schema's descriptions): every key of the stack program, grouped as Pulumi.yaml
groups them. `python -m gemma4_t4.project_file` prints it; `make generate` (gemma4_t4/generate.py) writes
it into Pulumi.yaml, with docs/config-reference.md (`--markdown`), and `make test` fails while either differs.
"""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Mapping
from importlib.resources import files
from typing import Any

from .clouds import CLOUDS
from .clouds.stack_config import CLOUD_KEY, config_keys, print_section, project_config

GROUP_TITLES = {
    "": "Both clouds: which component, and how vLLM serves the model (flags on GCE, SM_VLLM_* on SageMaker).",
    "gce": "GCE (gce-t4): the VM, its disks, the guest's listener and the cost guard.",
    "sagemaker": "SageMaker (sagemaker-t4; the region is aws:region): the endpoint, the image build, the cost guard.",
}


def descriptions(schema: Mapping[str, Any] | None = None) -> dict[str, str]:
    """{key: its description in the package SCHEMA (by default the committed components/schema.json), on one
    line}."""
    if schema is None:
        schema = json.loads((files("gemma4_t4.components") / "schema.json").read_text())
    found: dict[str, str] = {}
    for resource in schema["resources"].values():
        for key, prop in resource["inputProperties"].items():
            found.setdefault(key, " ".join(prop.get("description", "").split()))
    return found


def section(schema: Mapping[str, Any] | None = None) -> dict[str, dict[str, Any]]:
    return project_config(CLOUDS, descriptions(schema))


def section_text(schema: Mapping[str, Any] | None = None) -> str:
    """The `config:` section as Pulumi.yaml holds it, from `config:` to the end of the file."""
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        print_section(section(schema), groups())
    return printed.getvalue()


def groups() -> list[tuple[str, list[str]]]:
    """The shared keys first, then each cloud's own."""
    per_cloud = {name: list(config_keys(cloud.settings)) for name, cloud in CLOUDS.items()}
    shared = [key for key in next(iter(per_cloud.values())) if all(key in keys for keys in per_cloud.values())]
    result = [(GROUP_TITLES[""], [CLOUD_KEY, *shared])]
    result += [(GROUP_TITLES.get(name, f"{name}:"), [k for k in keys if k not in shared])
               for name, keys in per_cloud.items()]
    return result


def reference(schema: Mapping[str, Any] | None = None) -> str:
    """docs/config-reference.md: every key, its type, default and description, as Pulumi.yaml has
    them (`python -m gemma4_t4.project_file --markdown`; `make generate` writes the page)."""
    keys = section(schema)
    lines = ["# Configuration reference", "",
             "Every key of the `gemma4-t4` stacks, set with `pulumi config set gemma4-t4:KEY VALUE` (a dotted key",
             "such as `labels.team` with `--path`). Generated from the components' settings; a stack file sets",
             "only what differs from these defaults, and a key of the other cloud is refused with the reason.", ""]
    for title, names in groups():
        lines += [f"## {title}", "", "| key | type | default | what it does |", "|---|---|---|---|"]
        for name in names:
            entry = keys[name]
            default = json.dumps(entry.get("default")) if "default" in entry else ""
            description = entry.get("description", "").replace("|", "\\|")
            lines.append(f"| `{name}` | {entry.get('type', 'object')} | `{default}` | {description} |")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    import sys

    if "--markdown" in (sys.argv[1:] if argv is None else argv):
        print(reference(), end="")
        return
    print(section_text(), end="")


if __name__ == "__main__":
    main()
