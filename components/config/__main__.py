"""`python -m components.config`: Pulumi.yaml's `config:` section as the schema says it, one key a
line in flow style, grouped as Pulumi.yaml groups them. Paste it over the section after changing
a key in schema.py (tests/test_config_schema.py holds the two equal)."""

from __future__ import annotations

import json
from typing import Any

from . import GceT4ServerArgs, SageMakerT4EndpointArgs, StackArgs, keys_of, project_config

GROUPS: tuple[tuple[str, type[StackArgs]], ...] = (
    ("Both clouds: which component, and how vLLM serves the model (flags on GCE, SM_VLLM_* on SageMaker).",
     StackArgs),
    ("GCE (gce-t4): the VM, its disks, the guest's listener and the cost guard.", GceT4ServerArgs),
    ("SageMaker (sagemaker-t4; the region is aws:region): the endpoint, the image build, the cost guard.",
     SageMakerT4EndpointArgs),
)


def _flow(name: str, value: Any) -> str:
    if name == "type":
        return str(value)
    return json.dumps(value)  # JSON is YAML: true, 16384, {}, "text"


def main() -> None:
    section = project_config()
    shared = set(keys_of(StackArgs))
    print("config:")
    for number, (title, model) in enumerate(GROUPS):
        print(("\n" if number else "") + f"  # {title}")
        for key in keys_of(model):
            if model is not StackArgs and key in shared:
                continue
            spec = section[key]
            parts = [f"{name}: {_flow(name, spec[name])}" for name in ("type", "default", "description")
                     if name in spec]
            print(f"  {key}: {{{', '.join(parts)}}}")


if __name__ == "__main__":
    main()
