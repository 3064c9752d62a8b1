"""One contract for both clouds: each serving component registers the same outputs, the program
exports them as registered, and the operator tools need nothing else to find the server."""

from __future__ import annotations

import pytest

from gemma4_t4.contract import OUTPUTS

COMPONENTS = {"gce-t4": "gemma4-t4:index:GceT4Server", "sagemaker-t4": "gemma4-t4:index:SageMakerT4Endpoint"}


@pytest.mark.parametrize("stack", sorted(COMPONENTS))
def test_the_component_registers_every_contract_output_and_the_stack_exports_them(run_stack, stack):
    plan = run_stack(stack)
    component = plan.one(COMPONENTS[stack])
    registered = component.registered_outputs
    assert registered is not None, "the component never called register_outputs"
    assert set(OUTPUTS) <= set(registered)
    for name in OUTPUTS:
        assert plan.outputs[name] == registered[name], name
        assert plan.outputs[name] is not None, f"{name} is empty"


def test_both_stacks_export_the_same_contract_names(run_stack):
    exported = {stack: set(run_stack(stack).outputs) & set(OUTPUTS) for stack in COMPONENTS}
    assert exported["gce-t4"] == exported["sagemaker-t4"] == set(OUTPUTS)


@pytest.mark.parametrize("stack,cloud,target_keys", [
    ("gce-t4", "gce", {"instance", "zone", "project"}),
    # stack_tags: the tags that mark the stack's endpoints (its organization, project and stack), for status.
    ("sagemaker-t4", "sagemaker", {"endpoint_name", "region", "stack_tags"}),
])
def test_target_says_everything_the_operator_tools_need(run_stack, stack, cloud, target_keys):
    outputs = run_stack(stack).outputs
    assert outputs["cloud"] == cloud and set(outputs["target"]) == target_keys
    for value in outputs["target"].values():
        texts = list(value.values()) if isinstance(value, dict) else [value]
        assert texts and all(isinstance(text, str) and text for text in texts), value


def test_the_stacks_port_flows_into_the_tunnel(run_stack):
    outputs = run_stack("gce-t4", "port=8100").outputs
    assert outputs["port"] == 8100
    assert outputs["connect_command"].endswith("-- -f -N -L 8100:127.0.0.1:8100")
