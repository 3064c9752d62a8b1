"""The components as a Pulumi package for every language: the committed schema is what Pulumi's analyzer
makes of the components today, every input is documented, the provider Pulumi runs serves it, a
component constructed through the provider registers what the Python API registers, a refusal reaches
the engine as an input error, and the YAML example sets only inputs the schema has, with their types.

pulumi.provider cannot load beside google-cloud-compute (see tests/package_probe.py), so what needs it
runs in a process of its own."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml
from conftest import REPO

from gemma4_t4 import generate

SCHEMA = json.loads((REPO / "components" / "schema.json").read_text())
TOKENS = {"GceT4Server": "gemma4-t4:index:GceT4Server", "SageMakerT4Endpoint": "gemma4-t4:index:SageMakerT4Endpoint"}
PROBE = [sys.executable, str(REPO / "tests" / "package_probe.py")]


def _probe(*args: str) -> str:
    done = subprocess.run([*PROBE, *args], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_the_committed_schema_is_what_the_analyzer_makes_of_the_components():
    regenerated = json.loads(_probe("schema"))
    assert regenerated == SCHEMA, "components/schema.json is stale: run `make generate`"
    assert generate.schema_text() == (REPO / "components" / "schema.json").read_text(), "run `make generate`"


def test_the_private_pulumi_apis_the_package_uses_work_as_it_uses_them_on_the_locked_versions(tmp_path):
    """_sync_await, pulumi_gcp._utilities and pulumi.provider.experimental are outside Pulumi's semver: each is run
    as the package runs it (tests/pulumi_private_probe.py), here on requirements.lock's versions and in
    tests/install/test_wheel.py on pyproject.toml's floors."""
    (tmp_path / "probe.py").write_text((REPO / "tests" / "pulumi_private_probe.py").read_text())
    done = subprocess.run([sys.executable, "probe.py"], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    checks = json.loads(done.stdout.splitlines()[-1])
    assert len(checks) == 6 and all(check["ok"] for check in checks.values()), checks


def test_descriptions_are_the_same_under_every_python():
    """CPython 3.13 (Debian 13's) strips docstring indentation at compile time, 3.11 does not: a
    description that kept its source indentation would make the schema differ by interpreter."""
    def descriptions(node):
        if isinstance(node, dict):
            for key, value in node.items():
                yield from [value] if key == "description" and isinstance(value, str) else descriptions(value)
        elif isinstance(node, list):
            for item in node:
                yield from descriptions(item)

    indented = [text for text in descriptions(SCHEMA) if any(line.startswith(" ") for line in text.splitlines())]
    assert not indented, indented[:2]


@pytest.mark.parametrize("component", sorted(TOKENS))
def test_every_input_and_output_is_documented(component):
    resource = SCHEMA["resources"][TOKENS[component]]
    assert resource["description"]
    undocumented = [key for key, spec in {**resource["inputProperties"], **resource["properties"]}.items()
                    if not spec.get("description")]
    assert not undocumented, f"{component}: {undocumented}"
    # The contract's outputs are every component's.
    from gemma4_t4.contract import OUTPUTS

    assert {"servedModelName", "connectCommand", "costPerHourUsd"} <= set(resource["properties"])
    assert len(OUTPUTS) <= len(resource["properties"])


def test_inputs_known_at_preview_are_plain_and_outputs_of_other_resources_are_inputs():
    gce = SCHEMA["resources"][TOKENS["GceT4Server"]]["inputProperties"]
    assert gce["maxModelLen"] == {**gce["maxModelLen"], "type": "integer", "plain": True, "default": 16384}
    assert gce["zone"]["plain"] is True and "plain" not in gce["network"] and "plain" not in gce["subnetwork"]
    assert gce["dtype"]["$ref"] == "#/types/gemma4-t4:index:DType"
    sagemaker = SCHEMA["resources"][TOKENS["SageMakerT4Endpoint"]]["inputProperties"]
    assert "plain" not in sagemaker["hfToken"] and "plain" not in sagemaker["executionRoleArn"]
    assert SCHEMA["types"]["gemma4-t4:index:MemoryPlan"]["properties"]["kvCacheTokens"]["type"] == "integer"


def test_construct_registers_what_the_python_api_registers(tmp_path):
    cases = [
        {"component": "GceT4Server", "args": {"zone": "us-central1-a", "max_model_len": 8192, "labels": {"team": "ml"}},
         "inputs": {"zone": "us-central1-a", "maxModelLen": 8192.0, "labels": {"team": "ml"}}},
        {"component": "SageMakerT4Endpoint", "args": {"region": "us-east-2", "endpoint_ttl": "8h", "max_instance_count": 2},
         "inputs": {"region": "us-east-2", "endpointTtl": "8h", "maxInstanceCount": 2.0}},
    ]
    (tmp_path / "cases.json").write_text(json.dumps(cases))
    results = json.loads(_probe("construct", str(tmp_path / "cases.json")))
    for case, result in zip(cases, results, strict=True):
        assert result["python"] == result["construct"], case["component"]
        types = [r["type"] for r in result["construct"]]
        assert types[0] == TOKENS[case["component"]] and len(types) > 5
    vm = next(r for r in results[0]["construct"] if r["type"] == "gcp:compute/instance:Instance")
    assert vm["inputs"]["zone"] == "us-central1-a"
    assert "--max-model-len 8192" in vm["inputs"]["metadata"]["gemma4-t4-serving"]


def test_a_refused_input_reaches_the_engine_as_an_input_error_with_the_fix():
    out = json.loads(_probe("refuse", TOKENS["GceT4Server"], json.dumps({"maxModelLen": 999999.0})))
    assert out["property_path"] == "maxModelLen"
    assert "context of 131,072" in out["reason"] and "fix: maxModelLen: 16384" in out["reason"]


def test_the_plugin_pulumi_runs_serves_the_committed_schema():
    """provider/__main__.py as the language host starts it (the engine's address; the port on stdout):
    GetSchema over gRPC answers the committed schema."""
    assert json.loads(_probe("plugin", str(REPO / "provider"))) == SCHEMA


def test_the_plugin_manifest_and_its_requirements_name_this_checkout():
    manifest = yaml.safe_load((REPO / "provider" / "PulumiPlugin.yaml").read_text())
    assert manifest["runtime"] == "python"
    requirements = (REPO / "provider" / "requirements.txt").read_text().split()
    assert {"..", "../turing"} <= set(requirements)


# --- the YAML example, checked against the schema -------------------------------------------------------

def _check_value(value, spec, where: str) -> None:
    if "$ref" in spec:
        kind = SCHEMA["types"][spec["$ref"].removeprefix("#/types/")]
        if "enum" in kind:
            assert value in [member["value"] for member in kind["enum"]], f"{where}: {value!r} is not one of the enum"
            return
        spec = kind
    expected = spec.get("type")
    if isinstance(value, str) and value.startswith("${"):
        assert "plain" not in spec, f"{where}: an output ({value}) goes to an input that must be known at preview"
        return
    checks = {"string": str, "boolean": bool, "integer": int, "number": (int, float), "object": dict, "array": list}
    assert isinstance(value, checks[expected]) and not (expected in ("integer", "number") and isinstance(value, bool)), (
        f"{where}: {value!r} is not {expected}")
    if expected == "object" and "additionalProperties" in spec:
        for key, item in value.items():
            _check_value(item, spec["additionalProperties"], f"{where}.{key}")


def test_the_yaml_example_sets_only_inputs_the_schema_has_with_their_types():
    program = yaml.safe_load((REPO / "examples" / "yaml" / "Pulumi.yaml").read_text())
    ours = {name: r for name, r in program["resources"].items() if r["type"].startswith("gemma4-t4:")}
    assert {r["type"] for r in ours.values()} >= set(TOKENS.values())
    for name, resource in ours.items():
        inputs = SCHEMA["resources"][resource["type"]]["inputProperties"]
        for key, value in (resource.get("properties") or {}).items():
            assert key in inputs, f"{name}: {key} is not an input of {resource['type']}"
            _check_value(value, inputs[key], f"{name}.{key}")
        required = SCHEMA["resources"][resource["type"]].get("requiredInputs", [])
        assert set(required) <= set(resource.get("properties") or {}), name
    for output in program.get("outputs", {}).values():
        target, _, prop = output.strip("${}").partition(".")
        if target in ours:
            assert prop.split(".")[0] in SCHEMA["resources"][ours[target]["type"]]["properties"], output
