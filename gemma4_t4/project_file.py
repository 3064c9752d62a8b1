"""Pulumi.yaml's `config:` section, made from the components' Settings (types, defaults) and their Args'
documentation (the package schema's descriptions): every key of the stack program, grouped as Pulumi.yaml
groups them. `python -m gemma4_t4.project_file` prints it to paste over the section after a change
(tests/components/test_config_schema.py holds the two equal).
"""

from __future__ import annotations

import json
from importlib.resources import files
from typing import Any

from .clouds import CLOUDS
from .clouds.stack_config import CLOUD_KEY, config_keys, print_section, project_config

GROUP_TITLES = {
    "": "Both clouds: which component, and how vLLM serves the model (flags on GCE, SM_VLLM_* on SageMaker).",
    "gce": "GCE (gce-t4): the VM, its disks, the guest's listener and the cost guard.",
    "sagemaker": "SageMaker (sagemaker-t4; the region is aws:region): the endpoint, the image build, the cost guard.",
}


def descriptions() -> dict[str, str]:
    """{key: its description in the package schema (components/schema.json), on one line}."""
    schema = json.loads((files("gemma4_t4.components") / "schema.json").read_text())
    found: dict[str, str] = {}
    for resource in schema["resources"].values():
        for key, prop in resource["inputProperties"].items():
            found.setdefault(key, " ".join(prop.get("description", "").split()))
    return found


def section() -> dict[str, dict[str, Any]]:
    return project_config(CLOUDS, descriptions())


def groups() -> list[tuple[str, list[str]]]:
    """The shared keys first, then each cloud's own."""
    per_cloud = {name: list(config_keys(cloud.settings)) for name, cloud in CLOUDS.items()}
    shared = [key for key in next(iter(per_cloud.values())) if all(key in keys for keys in per_cloud.values())]
    result = [(GROUP_TITLES[""], [CLOUD_KEY, *shared])]
    result += [(GROUP_TITLES.get(name, f"{name}:"), [k for k in keys if k not in shared])
               for name, keys in per_cloud.items()]
    return result


def reference() -> str:
    """docs/config-reference.md: every key, its type, default and description, as Pulumi.yaml has
    them (`python -m gemma4_t4.project_file --markdown`; tests/cli/test_docs.py holds the page equal)."""
    keys = section()
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
    print_section(section(), groups())


if __name__ == "__main__":
    main()
