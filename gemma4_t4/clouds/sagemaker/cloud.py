"""SageMaker: the sagemaker-t4 stack builds SageMakerT4Endpoint; its server is the endpoint, through
sagemaker-runtime. The region and the credentials are the AWS provider's (stack config aws:*)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from ... import catalog
from ...catalog import CODEBUILD_COMPUTE_TYPE, PULUMI_AWS_CONFIG_KEYS, PULUMI_AWS_LEGACY_CONFIG_KEYS
from ...checks import Check
from ...components.config import SageMakerT4EndpointSettings, check_sagemaker_region
from ...components.provider_answers import RUN
from ...components.sagemaker import cost, quotas
from ...components.sagemaker import provider_answers as answers
from ...components.sagemaker.scope import StackScope
from ...core import ops
from ...core.capacity import RegionsReport
from ...core.cost import CostEstimate, CostItem
from ...core.failures import Failure
from ...core.mock_answers import Invoke, StateStandIn
from ...core.offers import Offer
from ...core.plan import Plan
from ...core.preflight import Needs
from ...core.targets import Target, TargetError
from ...errors import PROJECT, ConfigError, Set
from ..base import Cloud, Feature, Place, Secret, refuse_unknown_provider_keys
from . import capacity, failures, preflight
from .lifecycle import NO_BOOT_WATCH, NOT_STOPPABLE
from .preflight import SageMakerNeeds
from .target import SAGEMAKER_INVOKE_LIMIT_S, SageMakerTarget

if TYPE_CHECKING:
    from .standins import AwsWorld as World

ENDPOINT_CONFIG = "aws:sagemaker/endpointConfiguration:EndpointConfiguration"
CODEBUILD_PROJECT = "aws:codebuild/project:Project"
SCALING_TARGET = "aws:appautoscaling/target:Target"
LOCAL_BUILD_NOTE = ("The image is built on this machine (imageBuilder local): no CodeBuild minutes; the 8 GB base is "
                    "pulled from ECR to here (AWS data transfer out, at your account's rate) and the 8.3 GB image "
                    "pushed back.")


def _config_object(config: Mapping[str, Any], key: str) -> Any:
    """A structured aws:* value (a list or an object), as Pulumi hands it to the program: JSON text."""
    value = config.get(key)
    if isinstance(value, str):
        return json.loads(value) if value.strip() else None
    return value


def build_environment(config: Mapping[str, Any]) -> dict[str, Any]:
    """The AWS provider's own settings (stack config aws:*) as the environment boto3 reads, so the image
    build step works in the account the resources are made in. Unset keys are left out: then both fall
    back to the same default chain (AWS_* variables, ~/.aws)."""
    env: dict[str, Any] = {}
    for key, var in (("aws:accessKey", "AWS_ACCESS_KEY_ID"), ("aws:secretKey", "AWS_SECRET_ACCESS_KEY"),
                     ("aws:token", "AWS_SESSION_TOKEN")):
        if config.get(key):
            env[var] = Secret(str(config[key]))
    for key, var in (("aws:sharedCredentialsFiles", "AWS_SHARED_CREDENTIALS_FILE"),
                     ("aws:sharedConfigFiles", "AWS_CONFIG_FILE")):
        if files := _config_object(config, key):
            env[var] = files[0]
    # aws:assumeRoles (pulumi-aws 7: a list, assumed in order); aws:assumeRole (older: one object).
    roles = _config_object(config, "aws:assumeRoles") or (
        [role] if (role := _config_object(config, "aws:assumeRole")) else [])
    if roles:
        env["GEMMA4_T4_ASSUME_ROLES"] = json.dumps(roles)
    for entry in _config_object(config, "aws:endpoints") or []:
        for service, url in entry.items():
            if variable := endpoint_variable(service):
                env[variable] = url
    return env


def endpoint_variable(service: str) -> str | None:
    """The variable botocore reads SERVICE's endpoint from (AWS_ENDPOINT_URL_ and its service id, snake case), for
    an aws:endpoints key (the provider's service name); None for a service no local step calls."""
    import botocore.session

    client = catalog.PULUMI_AWS_ENDPOINT_CLIENTS.get(service.lower())
    if client is None:
        return None
    service_id = botocore.session.get_session().get_service_model(client).service_id
    return f"AWS_ENDPOINT_URL_{service_id.hyphenize().replace('-', '_').upper()}"


def image_costs(plan: Plan) -> list[CostItem]:
    """The image's costs beside the endpoint's hours (components/sagemaker/cost.py image_charges), from the plan:
    whether CodeBuild builds (else imageBuilder local: built on this machine, cost(): the note), the base image's
    registry region and the endpoint's."""
    projects = plan.find(CODEBUILD_PROJECT)
    base = None
    if projects:
        variables = {v["name"]: v["value"] for v in projects[0].inputs["environment"]["environmentVariables"]}
        base = catalog.ECR_IMAGE.fullmatch(variables.get("BASE_IMAGE", ""))
    region = (plan.outputs.get("target") or {}).get("region", "")
    return [CostItem(charge.name, charge.usd, charge.per, charge.source) for charge in cost.image_charges(
        bool(projects), base["region"] if base is not None else None, region)]


class SageMaker(Cloud):
    name = "sagemaker"
    component = "gemma4_t4.components.sagemaker:SageMakerT4Endpoint"
    settings = SageMakerT4EndpointSettings
    stack = "sagemaker-t4"
    preset: ClassVar[Mapping[str, Any]] = {"aws:region": "us-east-2", "gemma4-t4:cloud": "sagemaker",
                                 "gemma4-t4:maxModelLen": 8192}
    offers_note = ("SageMaker: only the regions whose ml.g4dn.xlarge price the catalog records; "
                   "`gemma4-t4 preflight sagemaker-t4 --all-regions` asks your account about the others")
    provider_keys: ClassVar[Mapping[str, str]] = {"region": "aws:region", "profile": "aws:profile"}
    unsupported: ClassVar[Mapping[Feature, str]] = {
        Feature.STOP_START: NOT_STOPPABLE,
        Feature.BOOT_WATCH: NO_BOOT_WATCH,
        Feature.BLOCKING_QUERY: f"SageMaker cuts a real-time invocation at {SAGEMAKER_INVOKE_LIMIT_S} s "
                                "(InvokeEndpoint): a reply is streamed",
        Feature.ZONE_FAILOVER: "an endpoint is placed by SageMaker within its region: `up` checks the endpoint "
                               "quota and the image builder first instead",
        Feature.SPOT: "SageMaker endpoints have no spot capacity",
    }
    counterparts: ClassVar[Mapping[str, str]] = {
        "maxRunHours": "endpointTtl (EventBridge Scheduler deletes the endpoint)",
        "idleStopMinutes": "endpointTtl (EventBridge Scheduler deletes the endpoint)",
        "spot": "nothing: SageMaker endpoints have no spot capacity",
        "machineType": "instanceType",
        "vllmVersion": "nothing: the endpoint runs the vLLM of the AWS container it derives from "
                       "(catalog pin vllm.sagemaker)",
        **{key: "nothing: the endpoint is called with AWS credentials (SigV4), and IAM decides who may"
           for key in ("apiKey", "apiSourceRanges", "operators")},
    }

    def name_prefix(self, project: str, stack: str) -> str:
        # The stack: its kept image repository has been gemma4-t4/STACK since the first release.
        return stack.lower()

    def provider_args(self, config: Mapping[str, Any]) -> dict[str, Any]:
        refuse_unknown_provider_keys(config, "aws", PULUMI_AWS_CONFIG_KEYS | PULUMI_AWS_LEGACY_CONFIG_KEYS, "AWS")
        region = str(config.get("aws:region") or "").strip()
        if not region:
            raise ConfigError("aws:region", "is not set", Set("aws:region", "us-east-2"))
        args: dict[str, Any] = {}
        if str(config.get("aws:skipRegionValidation") or "").lower() != "true":
            check_sagemaker_region(region, (" (a region newer than botocore: ",
                                            Set("aws:skipRegionValidation", "true"), ")"))
            args["region"] = region
        # else the component asks the provider its region, as it does for a region it is not given: it checks
        # only a region given to it.
        if config.get("aws:profile"):
            args["profile"] = str(config["aws:profile"])
        if env := build_environment(config):
            args["image_build_environment"] = env
        return args

    def mock_invokes(self, world: World | None) -> dict[str, Invoke]:
        from .standins import AwsWorld as World
        from .standins import default_provider_region

        world = world or World()
        return {answers.GET_REPOSITORY: world.get_repository, answers.GET_REGION: default_provider_region,
                RUN: world.run_local_command}

    def mock_states(self) -> dict[str, StateStandIn]:
        from .standins import aws_state

        return {"aws": aws_state}

    def target(self, stack: str, outputs: Mapping[str, Any], endpoint_url: str | None = None) -> Target:
        target = outputs["target"]
        return SageMakerTarget(target["endpoint_name"], target["region"], endpoint_url=endpoint_url,
                               profile=target.get("profile"),
                               ttl_deletes_at=outputs.get("endpoint_deletes_at"),
                               ttl_dead_letter_queue_url=outputs.get("ttl_dead_letter_queue_url"),
                               ttl_backstop_dead_letter_queue_url=outputs.get("ttl_backstop_dead_letter_queue_url"),
                               stack=stack,
                               stack_tags=target.get("stack_tags"))

    def endpoint_target(self, endpoint: str, region: str, endpoint_url: str | None = None) -> Target:
        return SageMakerTarget(endpoint, region, endpoint_url=endpoint_url)

    def explain(self, err: BaseException) -> Failure | None:
        return failures.explain(err)

    def needs(self, plan: Plan, config: Mapping[str, Any]) -> Needs[SageMakerNeeds]:
        variant = plan.one(ENDPOINT_CONFIG).inputs["productionVariants"][0]
        instances = int(variant["initialInstanceCount"])
        scaling = plan.find(SCALING_TARGET)
        most = int(scaling[0].inputs["maxCapacity"]) if scaling else instances
        return Needs(self.name, str(config.get("aws:region") or "").strip(),
                     SageMakerNeeds(variant["instanceType"], instances, most))

    def preflight(self, stack: str, config: Mapping[str, Any], needs: Needs[SageMakerNeeds], place: Place
                  ) -> list[Check]:
        region = preflight.aws_region(needs)
        profile = preflight.aws_profile(config)
        # The image build first: `pulumi up` builds before it creates the endpoint (with CodeBuild, unless
        # imageBuilder builds it on this machine).
        builder = str(config.get("gemma4-t4:imageBuilder") or "codebuild").strip()
        build = [quotas.codebuild_check(region, CODEBUILD_COMPUTE_TYPE, preflight.fetch_codebuild_quota(
            region, CODEBUILD_COMPUTE_TYPE, profile))] if builder == "codebuild" else []
        in_state, scope = self.stack_in_state(stack)
        asked = needs.own
        quota, in_use, own, untyped = preflight.fetch_sagemaker(region, asked.instance_type, scope, profile)
        # What a change needs: both fleets (blue/green), or one with fleetChange single.
        single = str(config.get("gemma4-t4:fleetChange") or "").strip() == "single"
        checks = [*build, *quotas.sagemaker_checks(region, asked.instance_type, asked.instances, quota, in_use,
                                                      own, asked.most if asked.most > asked.instances else None,
                                                      untyped, single=single)]
        strays = preflight.strays_check(region, preflight.fetch_stack_endpoints(region, scope, profile), in_state,
                                        scope)
        return checks + ([strays] if strays else [])

    def stack_in_state(self, stack: str) -> tuple[str | None, StackScope]:
        """(the endpoint the stack's state holds, "" none, None if the Pulumi CLI cannot read it; the tags that mark
        the stack's endpoints: those its target output records, else this project's and the stack's, the
        organization unknown)."""
        try:
            outputs = ops.stack_outputs(stack)
        except TargetError:
            return None, StackScope(stack, PROJECT)
        target = outputs.get("target") or {}
        return str(target.get("endpoint_name") or ""), StackScope.of(target.get("stack_tags"), stack)

    def regions(self, stack: str, config: Mapping[str, Any], needs: Needs[SageMakerNeeds], place: Place
                ) -> RegionsReport:
        preflight.aws_region(needs)
        # This project's stack of that name (its organization is not asked: the Pulumi CLI is not run per region).
        fetched = capacity.fetch_sagemaker_regions(needs.own.instance_type, StackScope(stack, PROJECT),
                                                   capacity.sagemaker_region_names(list(place.regions)),
                                                   preflight.aws_profile(config))
        return capacity.sagemaker_regions(needs, fetched)

    def offers(self) -> list[Offer]:
        return capacity.t4_offers()

    def cost(self, plan: Plan, estimate: CostEstimate) -> None:
        estimate.extras += image_costs(plan)
        if not plan.find(CODEBUILD_PROJECT):
            estimate.notes.append(LOCAL_BUILD_NOTE)
        estimate.notes.append(NOT_STOPPABLE)

    def user_config(self, config: Mapping[str, Any]) -> dict[str, str]:
        """aws:region from the user's AWS configuration (AWS_REGION, AWS_DEFAULT_REGION, the profile's region in
        ~/.aws/config: boto3's Session.region_name, "Configuring credentials" in the boto3 guide)."""
        if config.get("aws:region"):
            return {}
        import boto3

        region = boto3.session.Session().region_name
        return {"aws:region": region} if region else {}


SAGEMAKER = SageMaker()
