"""The components as another program builds them: Args in Python, refusals in that program's words and
without a traceback, names from the component's name, a network or role the program brings, and the
AWS provider the program passes, its region read through the provider's own getRegion."""

from __future__ import annotations

import re

import pulumi
import pulumi_aws
import pytest
from conftest import REPO

from gemma4_t4.components import GceT4Server, InvalidArgs, SageMakerT4Endpoint
from gemma4_t4.core import plan as offline

pytestmark = pytest.mark.components

INSTANCE = "gcp:compute/instance:Instance"


def run(program, stack: str = "dev", invokes: dict | None = None) -> offline.Plan:
    from gemma4_t4 import clouds

    handlers = {}
    for cloud in clouds.CLOUDS.values():
        handlers.update(cloud.mock_invokes(None))
    return offline.run_program(stack, {}, invokes={**handlers, **(invokes or {})}, program=program)


def refused(program) -> InvalidArgs:
    with pytest.raises(InvalidArgs) as caught:
        run(program)
    return caught.value


def test_a_refusal_names_the_python_argument_and_the_fix_in_python():
    error = refused(lambda: GceT4Server("llm", {"max_model_len": 999999}))
    assert isinstance(error, pulumi.RunError), "Pulumi reports a RunError without a traceback"
    assert error.key == "max_model_len" and error.fix == "GceT4ServerArgs(max_model_len=16384)"
    assert str(error).startswith("max_model_len: 999,999 tokens exceeds")


def test_an_argument_the_component_does_not_have_is_refused_by_name():
    error = refused(lambda: GceT4Server("llm", {"max_modellen": 8192}))
    assert error.key == "max_modellen" and "is not a setting of this component" in error.problem
    assert error.fix == "leave max_modellen out of GceT4ServerArgs"


def test_two_servers_in_one_stack_have_their_own_names():
    plan = run(lambda: [GceT4Server(name, {}) for name in ("chat", "batch")])
    names = sorted(r.inputs["name"] for r in plan.find(INSTANCE))
    assert names == ["dev-batch-vm", "dev-chat-vm"]
    assert sorted(r.inputs["name"] for r in plan.find("gcp:compute/disk:Disk")) == ["dev-batch-data", "dev-chat-data"]


def test_a_name_prefix_that_gce_would_refuse_is_refused_with_one_it_takes():
    error = refused(lambda: GceT4Server("llm", {"name_prefix": "Team_A"}))
    assert error.key == "name_prefix" and error.fix == "GceT4ServerArgs(name_prefix='team-a')"


def test_a_network_the_program_brings_is_used_and_none_is_made():
    def program():
        net = pulumi.Output.from_input("projects/p/global/networks/mine")
        GceT4Server("llm", {"network": net, "subnetwork": "projects/p/regions/us-west2/subnetworks/mine"})

    plan = run(program)
    assert not plan.find("gcp:compute/network:Network") and not plan.find("gcp:compute/subnetwork:Subnetwork")
    assert {rule.inputs["network"] for rule in plan.find("gcp:compute/firewall:Firewall")} == {
        "projects/p/global/networks/mine"}
    nic = plan.one(INSTANCE).inputs["networkInterfaces"][0]
    assert nic["subnetwork"] == "projects/p/regions/us-west2/subnetworks/mine"


def test_a_network_without_its_subnetwork_is_refused():
    error = refused(lambda: GceT4Server("llm", {"network": "projects/p/global/networks/mine"}))
    assert error.key == "subnetwork" and "GceT4ServerArgs(subnetwork=" in error.fix


def test_an_unknown_model_is_not_sized_from_the_hub_unless_asked():
    """A component in a user's program makes no network call the user did not ask for."""
    error = refused(lambda: GceT4Server("llm", {"model": "Qwen/Qwen2.5-0.5B-Instruct"}))
    assert error.key == "model" and "sizeFromHub is off" in error.problem
    assert "GceT4ServerArgs(size_from_hub=True)" in error.fix


def test_the_sagemaker_region_and_profile_come_from_the_provider_the_program_passes():
    asked = []

    def get_region(args: dict) -> dict:
        # As the AWS provider answers getRegion without arguments: the region it is configured with
        # (terraform-provider-aws, internal/service/meta/region_data_source.go): the provider below's.
        asked.append(args)
        return {"name": "us-east-2", "region": "us-east-2"}

    def program():
        east = pulumi_aws.Provider("east", region="us-east-2", profile="ml-account")
        SageMakerT4Endpoint("api", {}, pulumi.ResourceOptions(provider=east))

    plan = run(program, invokes={"aws:index/getRegion:getRegion": get_region})
    assert asked, "the region is asked of the provider"
    component = plan.one("gemma4-t4:index:SageMakerT4Endpoint")
    assert component.registered_outputs["target"]["region"] == "us-east-2"
    assert component.registered_outputs["target"]["profile"] == "ml-account"
    build = plan.one("command:local:Command", "api-image-codebuild-run").inputs["environment"]
    assert build["AWS_REGION"] == "us-east-2" and build["AWS_PROFILE"] == "ml-account"
    assert all(r.parent for r in plan.resources if r.custom and not r.type.startswith("pulumi:providers:"))


def test_an_execution_role_the_program_brings_is_used_and_none_is_made():
    role = "arn:aws:iam::123456789012:role/sagemaker-ours"
    plan = run(lambda: SageMakerT4Endpoint("api", {"region": "us-east-2", "execution_role_arn": role}))
    assert plan.one("aws:sagemaker/model:Model").inputs["executionRoleArn"] == role
    assert [r.name for r in plan.find("aws:iam/role:Role")] == ["api-image-build-role"]


def test_no_component_reads_the_stack_config():
    """Region, profile and project come from Args or the provider, never pulumi.Config."""
    for path in (REPO / "components").rglob("*.py"):
        assert not re.search(r"pulumi\.Config\(|get_config\(", path.read_text()), path
