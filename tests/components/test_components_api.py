"""The components as another program builds them: Args in Python, refusals in that program's words and
without a traceback, names from the component's name, a network or role the program brings, and the
AWS provider the program passes, its region read through the provider's own getRegion."""

from __future__ import annotations

import asyncio
import re

import pulumi
import pulumi_aws
import pulumi_gcp as gcp
import pytest
from conftest import REPO

from gemma4_t4 import catalog
from gemma4_t4.components import GceT4Server, InvalidArgs, InvalidOutput, SageMakerT4Endpoint, TuringImage
from gemma4_t4.components.gce.provider_answers import GET_DISK
from gemma4_t4.core import plan as offline
from gemma4_t4.testing import GceWorld, ProviderMocks

INSTANCE = "gcp:compute/instance:Instance"


def run(program, stack: str = "dev", mocks: ProviderMocks | None = None, config: dict | None = None) -> offline.Plan:
    """PROGRAM under the project's public mocks (gemma4_t4.testing), recorded."""
    return offline.run_program(stack, config or {}, program=program, mocks=mocks or ProviderMocks())


def refused(program) -> InvalidArgs:
    with pytest.raises(InvalidArgs) as caught:
        run(program)
    return caught.value


def test_a_refusal_names_the_python_argument_and_the_fix_in_python():
    error = refused(lambda: GceT4Server("llm", {"max_model_len": 999999}))
    assert isinstance(error, pulumi.RunError), "Pulumi reports a RunError without a traceback"
    assert error.key == "max_model_len" and error.fix == "GceT4ServerArgs(max_model_len=16384)"
    assert str(error).startswith("max_model_len: 999,999 tokens exceeds")


@pytest.mark.parametrize(("given", "named"), [("max_modellen", "max_modellen"), ("maxModelLn", "max_model_ln"),
                                              ("maxmodellen", "maxmodellen")])
def test_an_argument_the_component_does_not_have_is_refused_with_the_one_it_means(given, named):
    """Either spelling the Args take (snake_case, or the schema's camelCase): the suggestion in Python's."""
    error = refused(lambda: GceT4Server("llm", {given: 8192}))
    assert error.key == named
    assert "is not a setting of this component" in error.problem
    assert error.fix.endswith("; did you mean GceT4ServerArgs(max_model_len=8192)?")


@pytest.mark.parametrize(("args", "value"), [({"max_model_len": 8192, "maxModelLen": 4096}, "VALUE"),
                                             ({"maxModelLen": 8192, "max_model_len": 8192}, "8192")])
def test_one_argument_in_both_spellings_is_refused_as_one_argument_given_twice(args, value):
    """Not "max_model_len is not a setting; did you mean max_model_len?": the two spellings are one setting."""
    error = refused(lambda: GceT4Server("llm", args))
    assert error.key == "max_model_len" and "is given twice, as max_model_len (" in error.problem
    assert "and as maxModelLen (" in error.problem and "not a setting" not in str(error)
    assert error.fix == f"give it once: GceT4ServerArgs(max_model_len={value})"


def test_an_argument_near_no_setting_is_refused_without_a_guess():
    error = refused(lambda: GceT4Server("llm", {"colour": "blue"}))
    assert error.fix == "leave colour out of GceT4ServerArgs"


@pytest.mark.parametrize(("given", "named", "fix"), [
    ("keep_image", "keep_image", "leave keep_image out of TuringImageArgs; did you mean "
     "TuringImageArgs(keep_images=True)?"),
    ("keepImage", "keep_image", "leave keep_image out of TuringImageArgs; did you mean "
     "TuringImageArgs(keep_images=True)?"),
    ("colour", "colour", "leave colour out of TuringImageArgs")])
def test_an_argument_the_image_does_not_have_is_refused_with_the_one_it_means(given, named, fix):
    """TuringImage checks its Args whole (TuringImageSettings), as the endpoint does: a misspelt one is not ignored."""
    error = refused(lambda: TuringImage("img", {"base_image": catalog.PINS["sagemaker.base_image"],
                                                "vllm_version": "0.1", "region": "us-east-2", given: True}))
    assert error.key == named and "is not a setting of this component" in error.problem
    assert error.fix == fix


def test_the_image_takes_no_argument_as_the_readme_says_of_every_component():
    """The catalog's base image and its vLLM, built in the region of the AWS provider it is given."""
    def program():
        ireland = pulumi_aws.Provider("ireland", region="eu-west-1")
        TuringImage("img", opts=pulumi.ResourceOptions(provider=ireland))

    plan = run(program, config={"aws:region": "us-east-2"})
    assert plan.one("gemma4-t4:index:TuringImage").registered_outputs["tag"].startswith(
        f"vllm-{catalog.PINS['vllm.sagemaker']}-sm75-")
    build = plan.one("command:local:Command", "img-codebuild-run").inputs["environment"]
    assert build["AWS_REGION"] == "eu-west-1"
    default = run(lambda: TuringImage("img"), config={"aws:region": "us-east-2"})
    assert default.one("command:local:Command", "img-codebuild-run").inputs["environment"]["AWS_REGION"] == "us-east-2"


def test_another_base_image_without_its_vllm_version_is_refused():
    error = refused(lambda: TuringImage("img", {"base_image": "123456789012.dkr.ecr.us-east-1.amazonaws.com/mine:1",
                                                "region": "us-east-1"}))
    assert error.key == "vllm_version" and error.fix == "TuringImageArgs(vllm_version=VALUE)"


def test_an_image_builder_the_image_does_not_know_is_refused_with_the_choices():
    error = refused(lambda: TuringImage("img", {"base_image": catalog.PINS["sagemaker.base_image"],
                                                "vllm_version": "0.1", "region": "us-east-2",
                                                "image_builder": "kaniko"}))
    assert error.key == "image_builder" and "'kaniko' is not one of codebuild, local" in error.problem
    assert error.fix == "TuringImageArgs(image_builder='local')"


def test_a_region_sagemaker_does_not_have_is_refused_as_the_stack_refuses_it(refused_stack):
    error = refused(lambda: SageMakerT4Endpoint("api", {"region": "us-east-9"}))
    stack_error, _ = refused_stack("sagemaker-t4", "aws:region=us-east-9")
    assert error.problem == stack_error.problem and "did you mean us-east-2?" in error.problem
    assert error.fix.startswith("SageMakerT4EndpointArgs(region='us-east-2')")
    assert stack_error.fix.startswith("pulumi config set aws:region us-east-2")


def test_a_subnetwork_in_another_region_than_the_zone_is_refused():
    subnet = "https://www.googleapis.com/compute/v1/projects/p/regions/us-central1/subnetworks/mine"
    error = refused(lambda: GceT4Server("llm", {"network": "projects/p/global/networks/mine", "subnetwork": subnet}))
    assert error.key == "subnetwork" and "is in us-central1, and zone us-west2-b is in us-west2" in error.problem
    assert error.fix.startswith("GceT4ServerArgs(zone='us-central1-")


class Recording(ProviderMocks):
    """The project's mocks, keeping the type of every resource the program registers (a failed run's too)."""

    def __init__(self, **worlds) -> None:
        super().__init__(**worlds)
        self.registered: list[str] = []

    def new_resource(self, args):
        self.registered.append(args.typ)
        return super().new_resource(args)


@pytest.mark.parametrize("external_ip", [True, False])
def test_a_subnetwork_output_in_another_region_fails_the_up_before_the_data_disk_is_made(external_ip):
    """The subnetwork another resource makes is known only once it exists: checked then, and nothing that bills or
    stays (the data disk, the Cloud NAT's router) is made before the check passes."""
    mocks = Recording()

    def program():
        net = gcp.compute.Network("net", auto_create_subnetworks=False)
        subnet = gcp.compute.Subnetwork("sub", network=net.id, region="europe-west4", ip_cidr_range="10.8.0.0/24")
        GceT4Server("llm", {"zone": "us-central1-a", "network": net.id, "subnetwork": subnet.id,
                            "external_ip": external_ip, "cloud_nat": not external_ip})

    with pytest.raises(InvalidOutput) as caught:
        run(program, mocks=mocks)
    error = caught.value
    assert str(error) == error.refusal.message, "Pulumi reports a RunError's message alone, not wrapped"
    assert error.key == "subnetwork" and "is in europe-west4, and zone us-central1-a is in us-central1" in error.problem
    assert error.fix.startswith("GceT4ServerArgs(zone='europe-west4-")
    assert "gcp:compute/subnetwork:Subnetwork" in mocks.registered
    made = {"gcp:compute/disk:Disk", "gcp:compute/router:Router", INSTANCE} & set(mocks.registered)
    assert not made, f"made before the refusal: {made}"


def test_a_subnetwork_output_in_the_zones_region_builds():
    def program():
        net = gcp.compute.Network("net", auto_create_subnetworks=False)
        subnet = gcp.compute.Subnetwork("sub", network=net.id, region="us-central1", ip_cidr_range="10.8.0.0/24")
        GceT4Server("llm", {"zone": "us-central1-a", "network": net.id, "subnetwork": subnet.id})

    plan = run(program)
    assert plan.one(INSTANCE).inputs["networkInterfaces"][0]["subnetwork"].endswith(
        "/regions/us-central1/subnetworks/sub-" + plan.one("gcp:compute/subnetwork:Subnetwork").state["name"][4:])


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
    def program():
        ireland = pulumi_aws.Provider("ireland", region="eu-west-1", profile="ml-account")
        SageMakerT4Endpoint("api", {}, pulumi.ResourceOptions(provider=ireland))

    # The default provider's region differs: the component must ask the provider it is given.
    plan = run(program, config={"aws:region": "us-east-2"})
    component = plan.one("gemma4-t4:index:SageMakerT4Endpoint")
    assert component.registered_outputs["target"]["region"] == "eu-west-1"
    assert component.registered_outputs["target"]["profile"] == "ml-account"
    build = plan.one("command:local:Command", "api-image-codebuild-run").inputs["environment"]
    assert build["AWS_REGION"] == "eu-west-1" and build["AWS_PROFILE"] == "ml-account"
    assert all(r.parent for r in plan.resources if r.custom and not r.type.startswith("pulumi:providers:"))


def test_the_sagemaker_region_is_the_default_providers_aws_region():
    plan = run(lambda: SageMakerT4Endpoint("api", {}), config={"aws:region": "eu-west-1"})
    assert plan.one("gemma4-t4:index:SageMakerT4Endpoint").registered_outputs["target"]["region"] == "eu-west-1"


def test_without_any_region_the_refusal_carries_the_providers_own_words(monkeypatch):
    monkeypatch.delenv("AWS_REGION", raising=False)
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    error = refused(lambda: SageMakerT4Endpoint("api", {}))
    assert error.key == "region" and 'missing required configuration key "aws:region"' in error.problem
    assert error.fix.startswith("SageMakerT4EndpointArgs(region='us-east-2')")


def test_an_execution_role_the_program_brings_is_used_and_none_is_made():
    role = "arn:aws:iam::123456789012:role/sagemaker-ours"
    plan = run(lambda: SageMakerT4Endpoint("api", {"region": "us-east-2", "execution_role_arn": role}))
    assert plan.one("aws:sagemaker/model:Model").inputs["executionRoleArn"] == role
    # The build's role and the TTL's (endpointTtl is on by default), no execution role.
    assert sorted(r.name for r in plan.find("aws:iam/role:Role")) == ["api-image-build-role", "api-ttl"]


def test_an_explicit_gcp_provider_makes_the_server_and_looks_for_its_disk_in_its_own_project():
    """As the AWS side answers with the explicit provider's region: the project of the gcp.Provider in opts, not the
    stack's gcp:project (which only the default provider reads)."""
    world, asked = GceWorld(), []

    def get_disk(args):
        asked.append(args.get("project"))
        return world.get_disk(args)

    def program():
        team = gcp.Provider("team", project="team-project")
        return GceT4Server("x", {}, pulumi.ResourceOptions(provider=team))

    found = as_a_user(ProviderMocks(gce=world, invokes={GET_DISK: get_disk}), program,
                      {"gcp:project": "stack-project"})
    assert found["target"]["project"] == "team-project" and "--project team-project " in found["connect"]
    assert asked and set(asked) == {"team-project"}, "the retained disk is looked for where the VM is made"


def test_no_component_reads_the_stack_config():
    """Region, profile and project come from Args or the provider, never pulumi.Config."""
    for path in (REPO / "components").rglob("*.py"):
        assert not re.search(r"pulumi\.Config\(|get_config\(", path.read_text()), path


# --- a user's unit tests: Pulumi's documented mocks, then the project's ----------------------------------


class DocumentedMocks(pulumi.runtime.Mocks):
    """Exactly the mocks of Pulumi's unit-testing guide (pulumi.com/docs/iac/guides/testing/unit/, Python)."""

    def new_resource(self, args: pulumi.runtime.MockResourceArgs):
        return [args.name + "_id", args.inputs]

    def call(self, args: pulumi.runtime.MockCallArgs):
        return {}


def as_a_user(mocks: pulumi.runtime.Mocks, program, config: dict | None = None) -> dict:
    """PROGRAM as a user's unit test runs it: set_mocks, pulumi.runtime.test; the outputs it returns."""
    from pulumi.runtime import settings

    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    settings.reset_options(project="user", stack="test", preview=False)
    pulumi.runtime.set_mocks(mocks, preview=False)
    pulumi.runtime.set_all_config(config or {})
    found: dict = {}
    try:
        @pulumi.runtime.test
        def test():
            component = program()
            return pulumi.Output.all(target=component.target, connect=component.connect_command,
                                     deletes_at=getattr(component, "endpoint_deletes_at", None)).apply(found.update)

        test()
    finally:
        pulumi.runtime.set_all_config({})
        asyncio.set_event_loop(None)
        loop.close()
    return found


PROGRAMS = {
    "gce": (lambda: GceT4Server("x"), {}),
    "sagemaker": (lambda: SageMakerT4Endpoint("x"), {}),
    # The second failure: the stack sets aws:region, and the generic getRegion answers {}.
    "sagemaker, aws:region set": (lambda: SageMakerT4Endpoint("x"), {"aws:region": "us-east-2"}),
    # Third and fourth: past the region, the image's URL and digest, and the TTL's clock.
    "sagemaker, region given": (lambda: SageMakerT4Endpoint("x", {"region": "us-east-2"}), {}),
    "sagemaker with a TTL": (lambda: SageMakerT4Endpoint("x", {"region": "us-east-2", "endpoint_ttl": "8h"}), {}),
    "sagemaker built locally": (lambda: SageMakerT4Endpoint("x", {"region": "us-east-2", "image_builder": "local"}),
                                {}),
}


@pytest.mark.parametrize("case", list(PROGRAMS))
def test_under_the_documented_mocks_a_component_stops_with_one_message_naming_the_projects_mocks(case):
    program, config = PROGRAMS[case]
    with pytest.raises(Exception) as caught:
        as_a_user(DocumentedMocks(), program, config)
    error = caught.value
    assert isinstance(error, pulumi.RunError), f"a bare {type(error).__name__}: {error}"
    assert "pulumi.runtime.set_mocks(gemma4_t4.testing.ProviderMocks(), preview=False)" in str(error)


@pytest.mark.parametrize("case", list(PROGRAMS))
def test_under_the_projects_mocks_the_same_program_builds(case, monkeypatch):
    monkeypatch.setenv("AWS_REGION", "us-east-2")  # where the provider reads a region besides aws:region
    program, config = PROGRAMS[case]
    found = as_a_user(ProviderMocks(), program, config)
    assert found["target"] and "None" not in found["connect"]
    if "TTL" in case:
        assert found["deletes_at"] == "2030-01-01T08:00:00Z", "the clock's time plus the TTL"
