"""SageMaker: Gemma 4 on an ml.g4dn.xlarge (one Tesla T4) endpoint, on the clamped image; split
over the four T4s of an ml.g4dn.12xlarge with tensorParallelSize; optionally autoscaled.

The host image is pinned: the CUDA 13 vLLM container needs driver 580, which only
al2023-ami-sagemaker-inference-gpu-4-1 has. Without the pin the endpoint sat in Creating for six
minutes and failed with CannotStartContainerError and no log group at all ([sagemaker-t4-article]).

Every change that needs a new fleet makes a new endpoint (blue/green by name), never an in-place
UpdateEndpoint: the endpoint's name is made from its configuration's, and the configuration is replaced
whenever anything the fleet runs changes (instance type or count, image, model, serving settings, a token
set or removed).
An in-place update that SageMaker rolls back ends InService on the old configuration, which the AWS
provider's waiter takes for success; Pulumi then deletes the old configuration and model the endpoint
still runs, and every later change fails with "Could not find endpoint configuration"
(hashicorp/terraform-provider-aws#48997, #46663). A new endpoint that fails fails its create instead (the
provider's waiter reports its FailureReason) and the `up` with it, while the old endpoint serves on. Each fleet's
model, configuration, endpoint and log group are named with the fleet's key (fleet.py), so they are never replaced:
a failed `up` leaves nothing of the serving fleet pending deletion (which Pulumi would delete first thing on the
next `up`, pulumi/pulumi#9979); the old fleet is deleted, endpoint first, at the end of the `up` whose new endpoint
is InService. With fleetChange single the old endpoint is deleted before the new one is created instead
(steps/single_fleet.py), for a quota of one fleet.

Autoscaling (maxInstanceCount) is an Application Auto Scaling target on the variant and a
target-tracking policy. SageMaker refuses to update an endpoint whose autoscaled variant would
change instance type, and an update restarts the fleet at its initial count: the blue/green
replacement avoids both. The old endpoint keeps serving at whatever scale it reached, with its
policy, until the new one is in service; the new one is registered for scaling only then (the
target waits for the endpoint, which waits for InService), and only then is the old one, with its
target, deleted. Nothing scales an endpoint in while it is being created or replaced.
"""

import functools
import hashlib
import json
import re
import shlex
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, cast

import pulumi
import pulumi_aws as aws
import pulumi_command as command

from gemma4_t4 import catalog
from gemma4_t4.errors import ConfigError, Set

from ..base import (
    CostGuard,
    MemoryPlan,
    NotAProviderAnswer,
    ServingArgs,
    T4ServingComponent,
    cost_guard,
    provider_for,
    refusals,
    type_token,
    warn_guards_off,
    with_alias,
)
from ..config import validate
from ..serving import ServingPlan, check_serving, warn_unpinned
from . import provider_answers as answers
from .container import container_environment
from .fleet import fleet_key
from .iam import account_of, sagemaker_trust, scheduler_trust, service_role
from .image import TuringImage, image_tag, kept_repository_name, refuse_unkeeping, step_environment
from .scope import StackScope, fleet_id
from .settings import FleetChange, ImageBuilder, SageMakerT4EndpointSettings, ScalingMetric, check_sagemaker_region
from .steps import account_check, created_at, endpoint_watch, single_fleet, ttl_passed

# Before 0.3.0 the component was registered under this type; the alias keeps deployed stacks' resources.
LEGACY_TYPE = "gemma4-t4:aws:SageMakerT4Endpoint"

# Scheduler's universal target, in the aws partition (a region of another is refused at preview).
DELETE_ENDPOINT_TARGET = f"arn:{catalog.AWS_PARTITION}:scheduler:::aws-sdk:sagemaker:deleteEndpoint"
# Printed just before CreateEndpoint is called and kept in the state: the backstop's clock, so that an `up` stopped
# during the endpoint's wait (Ctrl-C, a crash) still leaves a schedule that deletes the endpoint. (The TTL's own
# clock is the endpoint's CreationTime, read on every run of the program: steps/created_at.py.)
CLOCK = "date -u +%Y-%m-%dT%H:%M:%SZ"
# EventBridge Scheduler's most: 185 retries over 24 h. A delete refused while the endpoint is
# Updating is tried again; what still fails lands in the dead-letter queue (kept 14 days).
TTL_RETRY = {"maximum_retry_attempts": 185, "maximum_event_age_in_seconds": 86400}
DLQ_RETENTION_S = 14 * 24 * 3600
# The backstop schedule fires at least this long after the first: an update holds the endpoint in Updating about
# as long as a create takes ([sagemaker-t4-article]: 13.3 minutes to InService), well within the hour. It is made before
# CreateEndpoint is called, from the time of that call plus the longest the provider waits for InService, so it
# is never earlier than the first schedule plus this.
TTL_BACKSTOP = timedelta(hours=1)
CREATE_WAIT = timedelta(seconds=catalog.SAGEMAKER_ENDPOINT_CREATE_TIMEOUT_S)


VARIANT = "AllTraffic"


class SageMakerT4EndpointArgs(ServingArgs, total=False):
    """The arguments of SageMakerT4Endpoint. Every one is optional; the defaults are one ml.g4dn.xlarge
    (one Tesla T4) serving Gemma 4 E2B (QAT), on the driver-580 host image, from the clamped image."""

    region: str
    """AWS region of the endpoint, the image build and its repository. Default: the region of the AWS provider
    (the one in opts, else the default provider's aws:region)."""
    profile: str
    """The AWS profile of the account the resources are made in, for the image build step and the operator
    tools (the `target` output). Default: the profile of the AWS provider in opts, if it names one."""
    execution_role_arn: pulumi.Input[str]
    """An existing IAM role SageMaker assumes to pull the image, write the endpoint's logs and (with hfToken) read
    the token's secret. Default: a new role that may do only that."""
    image_build_environment: pulumi.Input[dict[str, str]]
    """Environment of the image build step's AWS client, for provider credentials that do not come from the
    environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_CONFIG_FILE...). Default:
    AWS_REGION and AWS_PROFILE from region and profile."""
    instance_type: str
    """SageMaker instance type (T4s: ml.g4dn.*). Default: the smallest with tensorParallelSize T4s
    (ml.g4dn.xlarge, or ml.g4dn.12xlarge for 2 or 4)."""
    instance_count: int
    """Instances behind the endpoint (with autoscaling: at the start)."""
    min_instance_count: int
    """Autoscaling: the fewest instances (0: instanceCount); needs maxInstanceCount."""
    max_instance_count: int
    """Autoscaling: the most instances Application Auto Scaling may run (0: no autoscaling, instanceCount
    always)."""
    scaling_metric: ScalingMetric
    """Autoscaling: what the policy tracks per instance: concurrentRequests (every 10 s, a request counted until
    its last token) or invocations (per minute)."""
    scaling_target: float
    """Autoscaling: the value per instance the policy keeps the metric at (0: maxNumSeqs concurrent requests,
    what vLLM serves at once)."""
    allow_non_t4_instance: bool
    """Opt-in: an instance type without a T4."""
    inference_ami_version: str
    """SageMaker host image; its driver must run the container's CUDA (the default's driver 580 runs CUDA 13)."""
    base_image: str
    """The AWS vLLM container (private ECR) the clamped image is built from."""
    base_image_cuda: str
    """The CUDA version the base image needs (MAJOR.MINOR, its NVIDIA_REQUIRE_CUDA), for a base whose tag does not
    say it (-cuXYZ-), e.g. one given by digest alone; checked against the host image's driver."""
    startup_health_check_timeout_seconds: int
    """How long SageMaker waits for the container to answer /ping, s (at least 300 on a T4)."""
    model_data_download_timeout_seconds: int
    """Model download time limit, s."""
    keep_images: bool
    """Keep the ECR repository and its images after the component is deleted (gemma4-t4/PREFIX)."""
    image_builder: ImageBuilder
    """Who builds the image: codebuild (AWS CodeBuild), or local (this machine, with the first of buildah, podman and
    docker found; buildah, podman or docker to choose), for an account CodeBuild refuses ("Cannot have more than 0
    builds in queue"): the same image into the same repository under the same tag."""
    fleet_change: FleetChange
    """How a change that needs a new fleet rolls out: blueGreen (the new endpoint beside the old one, which serves
    until the new one is InService; the endpoint quota must hold both fleets) or single (the old endpoint is deleted
    first, for a quota of one fleet: nothing serves for the ~13 minutes the new one takes, or at all if it
    fails)."""
    endpoint_ttl: str
    """Cost guard: how long the endpoint may stay up, counted from its creation, the ~13 minutes of creating
    included (8h, 90m, 1d12h; default 24h: a forgotten endpoint bills at most a day); EventBridge Scheduler then
    deletes it. off: never deleted."""
    log_retention_days: int
    """Days CloudWatch keeps the endpoint's logs (/aws/sagemaker/Endpoints/NAME, which destroy deletes): one of
    CloudWatch's retentions (1, 3, 5, 7, 14, 30, 60, 90, ... 3653)."""


def fallback_instance_types(instance_type: str) -> list[str]:
    """The other T4 instance types with as many T4s, smallest first: what to try when the region has no capacity
    for INSTANCE_TYPE ([sagemaker-t4-article] deployed with ml.g4dn.xlarge, then ml.g4dn.2xlarge)."""
    found = catalog.SAGEMAKER_INSTANCE_TYPES.get(instance_type)
    if found is None or instance_type not in catalog.SAGEMAKER_T4_INSTANCE_TYPES:
        return []
    same = [t for t in catalog.SAGEMAKER_T4_INSTANCE_TYPES
            if t != instance_type and catalog.SAGEMAKER_INSTANCE_TYPES[t].gpus == found.gpus]
    return sorted(same, key=lambda t: catalog.SAGEMAKER_INSTANCE_TYPES[t].vcpus)


def clock_time(printed: str | None, step: str) -> datetime:
    """The UTC time the clock step STEP printed (YYYY-MM-DDTHH:MM:SSZ, what `date -u` with CLOCK's format and
    steps/created_at.py always print); anything else is a mock's answer, refused with the mocks that answer as the
    steps do."""
    try:
        return datetime.fromisoformat(str(printed).strip().replace("Z", "+00:00"))
    except ValueError:
        raise NotAProviderAnswer(f"the clock step {step} printed {printed!r}, never a UTC time "
                                 "YYYY-MM-DDTHH:MM:SSZ as it always does") from None


def one_time_expression(at: str, after: timedelta, step: str = "clock") -> str:
    """Scheduler's at(...) for AFTER past the UTC time AT (YYYY-MM-DDTHH:MM:SSZ)."""
    when = clock_time(at, step) + after
    return f"at({when.strftime('%Y-%m-%dT%H:%M:%S')})"


def provider_region(provider: pulumi.ProviderResource | None, opts: pulumi.ResourceOptions | None) -> str:
    """The region the AWS provider makes resources in, as its getRegion answers it: from its own configuration,
    without an AWS call (terraform-provider-aws, data source aws_region). The provider always answers one (it
    does not start without a region), so an empty answer is a mock's."""
    try:
        found = aws.get_region(opts=pulumi.InvokeOptions(provider=provider, parent=opts.parent if opts else None))
    except Exception as error:
        raise ConfigError("region", f"is not set, and the AWS provider could not say its own: "
                          f"{answers.provider_message(error)}",
                          (Set("region", "us-east-2"), " (or give the AWS provider a region: aws:region)")) from None
    region = found.region or found.name or ""
    if not region:
        raise ConfigError("region", "is not set, and aws:index/getRegion:getRegion answered no region, which the AWS "
                          "provider never does", answers.USE_PROVIDER_MOCKS)
    return region


def default_prefix(name: str) -> str:
    return f"{pulumi.get_stack()}-{name}"


ENDPOINT_SUFFIX = 8  # hex digits from the configuration's name


def endpoint_name_start(prefix: str) -> str:
    """What every endpoint name of the stack starts with: PREFIX-endpoint- (PREFIX made of SageMaker's letters,
    digits and dashes, and cut so that the whole name stays within its 63)."""
    most = catalog.SAGEMAKER_ENDPOINT_NAME_MAX - len("-endpoint-") - ENDPOINT_SUFFIX
    stem = re.sub(r"[^a-zA-Z0-9]+", "-", prefix).strip("-")[:most].rstrip("-")
    return f"{stem}-endpoint-".lstrip("-")


def endpoint_name(prefix: str, config_name: str) -> str:
    """The endpoint's name: PREFIX-endpoint- and 8 hex digits from its configuration's name. Every change that
    needs a new fleet replaces the configuration, so it is a new endpoint beside the old one (blue/green by name),
    and its name is known before CreateEndpoint is called: the log group, the TTL's role and backstop are made
    for it first."""
    return endpoint_name_start(prefix) + hashlib.sha256(config_name.encode()).hexdigest()[:ENDPOINT_SUFFIX]


def endpoint_log_groups(prefix: str) -> str:
    """The log groups of every endpoint endpoint_name may name, as an IAM pattern (? is one character)."""
    return catalog.SAGEMAKER_ENDPOINT_LOG_GROUP.format(endpoint=endpoint_name_start(prefix) + "?" * ENDPOINT_SUFFIX)


def build_environment(provider: pulumi.ProviderResource | None, profile: pulumi.Output[str | None],
                      given: Any) -> pulumi.Output[dict[str, str]]:
    """The build step's AWS credentials: the explicit provider's (its keys and profile, as it was given them),
    then PROFILE, then what the caller gives (which wins)."""
    keys: dict[str, Any] = {}
    if isinstance(provider, aws.Provider):
        keys = {"AWS_ACCESS_KEY_ID": provider.access_key, "AWS_SECRET_ACCESS_KEY": provider.secret_key,
                "AWS_SESSION_TOKEN": provider.token}
    from_provider = pulumi.Output.all(**keys) if keys else pulumi.Output.from_input({})
    return pulumi.Output.all(from_provider, profile, pulumi.Output.from_input(given or {})).apply(
        lambda found: {**{k: v for k, v in found[0].items() if v}, **({"AWS_PROFILE": found[1]} if found[1] else {}),
                       **found[2]})


def cost_per_hour_usd(args: SageMakerT4EndpointSettings, instances: int | None = None) -> float | None:
    """At ``instances`` (default: the fewest the endpoint runs), at the region's list price."""
    price = catalog.SAGEMAKER_REGIONAL_PRICES.get(args.region, {}).get(args.instance_type)
    count = args.instances_min if instances is None else instances
    return None if price is None else round(price.usd_per_hour * count, 4)


def billing_after_destroy_usd_per_month(args: SageMakerT4EndpointSettings) -> float:
    if not args.keep_images:
        return 0.0
    return round(catalog.SAGEMAKER_IMAGE_BYTES / 1e9 * catalog.AWS_PRICES["ecr:gb-month"].usd_per_hour, 2)


def delete_target(endpoint_name: pulumi.Input[str], role: aws.iam.Role, dead_letters: aws.sqs.Queue
                  ) -> aws.scheduler.ScheduleTargetArgs:
    """Scheduler's universal target that deletes ENDPOINT_NAME as ROLE, retried, with the dead-letter queue."""
    return aws.scheduler.ScheduleTargetArgs(
        arn=DELETE_ENDPOINT_TARGET, role_arn=role.arn,
        input=pulumi.Output.json_dumps({"EndpointName": endpoint_name}),
        retry_policy=aws.scheduler.ScheduleTargetRetryPolicyArgs(**TTL_RETRY),
        dead_letter_config=aws.scheduler.ScheduleTargetDeadLetterConfigArgs(arn=dead_letters.arn))


@dataclass(frozen=True)
class TtlParts:
    """The TTL's parts made before CreateEndpoint is called; the schedule made after it shares them."""

    backstop: aws.scheduler.Schedule
    role: aws.iam.Role
    policy: pulumi.Resource
    dead_letters: aws.sqs.Queue


@dataclass(frozen=True)
class CheckedArgs:
    """The arguments, checked whole before anything is registered."""

    settings: SageMakerT4EndpointSettings
    plan: ServingPlan
    region: str
    ttl: timedelta | None


def check_endpoint_args(name: str, args: SageMakerT4EndpointArgs, opts: pulumi.ResourceOptions | None,
                        provider: pulumi.ProviderResource | None) -> CheckedArgs:
    """Everything a refusal needs, checked before anything is registered (a refusal in the caller's words)."""
    with refusals(SageMakerT4EndpointArgs.__name__):
        if given := args.get("region"):
            # The provider checks its own region (unless told not to); the component checks the one it is given.
            check_sagemaker_region(given, (" (a region newer than botocore: give it to the AWS provider in opts, "
                                           "with skip_region_validation)",))
        region = given or provider_region(provider, opts)
        settings = validate(SageMakerT4EndpointSettings, {**args, "region": region})
        plan = check_serving(settings, settings.gpu)
        ttl = settings.ttl()
        if not settings.keep_images:  # before anything is registered (the image checks it too)
            refuse_unkeeping(kept_repository_name(settings.name_prefix or default_prefix(name)), region,
                             pulumi.InvokeOptions(provider=provider, parent=opts.parent if opts else None))
    return CheckedArgs(settings, plan, region, ttl)


def variant_of(settings: SageMakerT4EndpointSettings) -> dict[str, Any]:
    """The production variant's settings (each a fleet setting: fleet.FLEET)."""
    return {"instance_type": settings.instance_type, "initial_instance_count": settings.instance_count,
            "inference_ami_version": settings.inference_ami_version,
            "container_startup_health_check_timeout_in_seconds": settings.startup_health_check_timeout_seconds,
            "model_data_download_timeout_in_seconds": settings.model_data_download_timeout_seconds}


class SageMakerT4Endpoint(T4ServingComponent):
    """Gemma 4 on a Tesla T4 behind an Amazon SageMaker real-time endpoint (ml.g4dn.xlarge, pinned to the
    driver-580 host image), serving the AWS vLLM container with the Turing clamp, built by CodeBuild into a
    private ECR repository; the OpenAI chat body at /invocations."""

    endpoint_name: pulumi.Output[str]
    """The endpoint's name."""
    image_uri: pulumi.Output[str]
    """The clamped image the endpoint serves, by digest."""
    memory_plan: pulumi.Output[MemoryPlan] | None
    """What vLLM will find on each GPU at start-up; absent for a model that was not sized."""
    cost_per_hour_usd_max: pulumi.Output[float] | None
    """With autoscaling: the catalog list price at the most instances."""
    scalable_target: pulumi.Output[str] | None
    """With autoscaling: the Application Auto Scaling resource id of the variant."""
    endpoint_deletes_at: pulumi.Output[str] | None
    """With endpointTtl: when EventBridge Scheduler deletes the endpoint (UTC)."""
    ttl_dead_letter_queue_url: pulumi.Output[str] | None
    """With endpointTtl: the queue where a delete that kept failing lands (then the endpoint still bills)."""
    hf_token_secret_arn: pulumi.Output[str] | None
    """With hfToken: the Secrets Manager secret holding it (the container reads it at start)."""
    model_revision: pulumi.Output[str] | None
    """The Hugging Face Hub revision vLLM downloads the model at (modelRevision, else the catalog's commit); empty
    when none is pinned (the Hub's main at each download); absent for a checkpoint directory on the server."""
    cost_guards: pulumi.Output[list[CostGuard]]
    """The guard that stops a forgotten endpoint's bill (endpointTtl): its value, or off with what that can cost
    per day."""

    # args: {} when omitted (read, never changed); Pulumi's analyzer reads its annotation as the package's inputs.
    def __init__(self, name: str, args: SageMakerT4EndpointArgs = {},  # noqa: B006
                 opts: pulumi.ResourceOptions | None = None) -> None:
        provider = provider_for("aws", opts)
        checked = check_endpoint_args(name, args, opts, provider)
        settings, region = checked.settings, checked.region
        super().__init__(type_token(SageMakerT4Endpoint), name, None, with_alias(opts, LEGACY_TYPE))
        tags = {"app": "gemma4-t4", **settings.labels}
        self._announce(settings, checked.plan)
        profile = pulumi.Output.from_input(settings.profile or (provider.profile if isinstance(provider, aws.Provider)
                                                                 else None))
        aws_environment = build_environment(provider, profile, settings.image_build_environment)
        served = container_environment(checked.plan.serving)
        environment: dict[str, pulumi.Input[str]] = dict(served)
        prefix = settings.name_prefix or default_prefix(name)
        # The fleet rule (fleet.py): its key names the fleet's resources and re-runs the account check; what the
        # container serves is in it, so no new model under the same names (a catalog's new pin included).
        fleet = fleet_key(settings, prefix, served)
        image = self._image(name, settings, region, aws_environment, fleet)
        # The account the stack's resources are made in, as the repository's ARN names it.
        account = account_of(image.repository_arn)
        token_secret = self._token_secret(name, settings.hf_token, tags) if settings.hf_token is not None else None
        role_arn, model_waits_for = self._execution_role(name, settings, image, region, account, prefix, token_secret,
                                                         tags)
        if token_secret is not None:
            # The ARN only: the image's entrypoint reads the token at start (turing/hf_token_entrypoint.py).
            environment[catalog.HF_TOKEN_SECRET_ENV] = token_secret[0].arn
            model_waits_for.append(token_secret[1])
        model = aws.sagemaker.Model(
            f"{name}-model-{fleet_id(fleet)}",
            execution_role_arn=role_arn,
            primary_container=aws.sagemaker.ModelPrimaryContainerArgs(image=image.image_uri, environment=environment),
            tags=tags,
            # The Model pulls the built image by digest: it must wait for the build and the role.
            opts=pulumi.ResourceOptions(parent=self, depends_on=model_waits_for, aliases=[pulumi.Alias(
                name=f"{name}-model")]),
        )
        endpoint, ttl_parts = self._endpoint(name, settings, checked.ttl, model, fleet, region, account,
                                             aws_environment, tags)
        scaling = self._autoscale(name, settings, endpoint, tags) if settings.autoscaling else None
        self.endpoint_name = endpoint.name
        self.image_uri = image.image_uri
        self.hf_token_secret_arn = token_secret[0].arn if token_secret is not None else None
        self._set_outputs(name, settings, checked, endpoint, ttl_parts, scaling, aws_environment, profile)

    def _announce(self, settings: SageMakerT4EndpointSettings, plan: ServingPlan) -> None:
        """The memory plan, and the GPUs that bill unused (an instance with more T4s than tensorParallelSize)."""
        if plan.memory is not None:
            pulumi.log.info(f"memory plan: {plan.memory.summary()}", resource=self)
        gpus = catalog.SAGEMAKER_INSTANCE_TYPES[settings.instance_type].gpus
        if gpus > settings.tensor_parallel_size:
            pulumi.log.warn(f"{settings.instance_type} carries {gpus} GPUs and tensorParallelSize "
                            f"{settings.tensor_parallel_size} uses {settings.tensor_parallel_size}: "
                            f"{gpus - settings.tensor_parallel_size} bill unused (tensorParallelSize {gpus} uses "
                            "them all)", resource=self)

    def _image(self, name: str, settings: SageMakerT4EndpointSettings, region: str,
               aws_environment: pulumi.Output[dict[str, str]], fleet: str) -> TuringImage:
        """The account check, then the clamped image, whose upload and build wait for it: nothing bills before it
        passed."""
        account_check = self._account_check(name, settings, region, aws_environment, fleet)
        return TuringImage(f"{name}-image", {
            "base_image": settings.base_image, "vllm_version": catalog.PINS["vllm.sagemaker"], "region": region,
            "keep_images": settings.keep_images, "name_prefix": settings.name_prefix or default_prefix(name),
            "tags": settings.labels, "build_environment": aws_environment, "image_builder": settings.image_builder},
            opts=pulumi.ResourceOptions(parent=self, depends_on=[account_check]))

    def _execution_role(self, name: str, settings: SageMakerT4EndpointSettings, image: TuringImage, region: str,
                        account: pulumi.Output[str], prefix: str,
                        token_secret: tuple[aws.secretsmanager.Secret, aws.secretsmanager.SecretVersion] | None,
                        tags: dict[str, str]) -> tuple[pulumi.Input[str], list[pulumi.Resource]]:
        """(the role SageMaker runs the model as, what the model waits for): the given executionRoleArn, else a new
        role that may pull the image, write the endpoint's logs and (with hfToken) read the token's secret."""
        log_groups = endpoint_log_groups(prefix)
        if settings.execution_role_arn is not None:
            pulumi.log.info(f"executionRoleArn: the role must allow writing to the log group {log_groups}"
                            + (" and secretsmanager:GetSecretValue on the hfToken secret (output hf_token_secret_arn)"
                               if token_secret else ""), resource=self)
            return settings.execution_role_arn, [image.build]
        # ARNs are written for the aws partition: a region of another is refused at preview (settings' region).
        log_group_arn = pulumi.Output.format("arn:{0}:logs:{1}:{2}:log-group:{3}", catalog.AWS_PARTITION, region,
                                             account, log_groups)
        role, role_policy = service_role(f"{name}-execution", "sagemaker.amazonaws.com", [
            {"Sid": "EcrLogin", "Effect": "Allow", "Action": "ecr:GetAuthorizationToken", "Resource": "*"},
            {"Sid": "PullImage", "Effect": "Allow",
             "Action": ["ecr:BatchCheckLayerAvailability", "ecr:GetDownloadUrlForLayer", "ecr:BatchGetImage"],
             "Resource": image.repository_arn},
            # Only the endpoint's own group, which the stack creates (CreateLogGroup finds it there).
            {"Sid": "EndpointLogs", "Effect": "Allow",
             "Action": ["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents",
                        "logs:DescribeLogStreams"],
             "Resource": [log_group_arn, pulumi.Output.concat(log_group_arn, ":*")]},
            {"Sid": "Metrics", "Effect": "Allow", "Action": "cloudwatch:PutMetricData", "Resource": "*",
             "Condition": {"StringEquals": {"cloudwatch:namespace": "/aws/sagemaker/Endpoints"}}},
            *([{"Sid": "HfToken", "Effect": "Allow", "Action": "secretsmanager:GetSecretValue",
                "Resource": token_secret[0].arn}] if token_secret else []),
        ], tags, self, sagemaker_trust(region, account))
        return role.arn, [image.build, role_policy]

    def _endpoint(self, name: str, settings: SageMakerT4EndpointSettings, ttl: timedelta | None,
                  model: aws.sagemaker.Model, fleet: str, region: str, account: pulumi.Output[str],
                  aws_environment: pulumi.Output[dict[str, str]], tags: dict[str, str]
                  ) -> tuple[aws.sagemaker.Endpoint, TtlParts | None]:
        """The endpoint configuration, the endpoint made from it (with its watch, log group and, with a TTL, what
        deletes it made first). The configuration, the endpoint and its log group are the fleet's (named with its
        key, fleet.py): a new fleet is new resources, and the old fleet goes at the end of the `up` that made it."""
        prefix = settings.name_prefix or default_prefix(name)
        # Named as before per-fleet names (0.4.0 and earlier): a stack's fleet keeps its resources on the upgrade.
        config = aws.sagemaker.EndpointConfiguration(
            f"{name}-config-{fleet_id(fleet)}",
            production_variants=[aws.sagemaker.EndpointConfigurationProductionVariantArgs(
                variant_name=VARIANT, model_name=model.name, **variant_of(settings))],
            tags=tags,
            opts=pulumi.ResourceOptions(parent=self, aliases=[pulumi.Alias(name=f"{name}-config")]),
        )
        # The endpoint's name follows its configuration (see endpoint_name); the watch lists it by its start.
        physical_name = config.name.apply(functools.partial(endpoint_name, prefix))
        self._watch_endpoint(name, config, region, aws_environment, fallback_instance_types(settings.instance_type),
                             endpoint_name_start(prefix), settings.log_retention_days)
        scope = StackScope.current().tags()
        log_group = self._endpoint_logs(name, fleet, physical_name, settings.log_retention_days, {**tags, **scope})
        # With a TTL, its delete schedule exists before CreateEndpoint is called (see _delete_after).
        ttl_parts = self._ttl_before_create(name, ttl, physical_name, region, account, config, tags,
                                            settings.autoscaling) if ttl is not None else None
        before = [log_group, *([ttl_parts.backstop] if ttl_parts else [])]
        single = settings.fleet_change == FleetChange.SINGLE
        if single:
            before.append(self._single_fleet(name, config, physical_name, fleet, region, aws_environment))
        # The stack's tags (its organization, project and stack: scope.py) let preflight, status and the account check
        # find this stack's endpoints (a change holds two fleets, and an `up` stopped during the wait leaves one
        # outside the state) and no other stack's; the fleet tag says what it runs.
        endpoint = aws.sagemaker.Endpoint(
            f"{name}-endpoint-{fleet_id(fleet)}", name=physical_name, endpoint_config_name=config.name,
            tags={**tags, **scope, catalog.SAGEMAKER_FLEET_TAG: fleet},
            # A new configuration of the same fleet (what fleet.FLEET cannot see: a role given as an Output) replaces
            # the endpoint (its name follows the configuration) rather than updating it in place; see the module's
            # docstring. Its log group first: SageMaker would otherwise make one that never expires.
            opts=pulumi.ResourceOptions(parent=self, replace_on_changes=["endpointConfigName"],
                                        delete_before_replace=single, depends_on=before,
                                        aliases=[pulumi.Alias(name=f"{name}-endpoint")]))
        return endpoint, ttl_parts

    def _single_fleet(self, name: str, config: aws.sagemaker.EndpointConfiguration, endpoint: pulumi.Output[str],
                      fleet: str, region: str, aws_environment: pulumi.Output[dict[str, str]]
                      ) -> command.local.Command:
        """fleetChange single: the stack's endpoints of another fleet are deleted before this fleet's endpoint is
        created (steps/single_fleet.py), once its image is built and its configuration made. Said at preview."""
        pulumi.log.warn("fleetChange single: a change that needs a new fleet deletes the serving endpoint before "
                        "it creates the new one; nothing serves until the new endpoint is InService (~13 minutes, "
                        "measured), nor at all if it fails. blueGreen (the default) keeps the old one serving, with "
                        "an endpoint quota for both fleets", resource=self)
        scope = StackScope.current()
        request = endpoint.apply(lambda found: single_fleet.SingleFleetRequest(
            stack=scope.stack, fleet=fleet, endpoint_name=found, project=scope.project,
            organization=scope.organization))
        return command.local.Command(
            f"{name}-single-fleet", create=single_fleet.command(),
            environment=step_environment(aws_environment, region, request),
            triggers=[fleet], opts=pulumi.ResourceOptions(parent=self, depends_on=[config]))

    def _set_outputs(self, name: str, settings: SageMakerT4EndpointSettings, checked: CheckedArgs,
                     endpoint: aws.sagemaker.Endpoint, ttl_parts: TtlParts | None,
                     scaling: aws.appautoscaling.Target | None, aws_environment: pulumi.Output[dict[str, str]],
                     profile: pulumi.Output[str | None]) -> None:
        """The optional outputs (None when the endpoint has no such part), the cost guards, and the contract."""
        plan, ttl, region, serving = checked.plan, checked.ttl, checked.region, checked.plan.serving
        self.memory_plan = pulumi.Output.from_input(cast(MemoryPlan, plan.memory.as_output())) if plan.memory else None
        # Outputs of what this endpoint has: None (not exported) for autoscaling and a TTL it was not given.
        most = cost_per_hour_usd(settings, settings.instances_max) if scaling is not None else None
        self.cost_per_hour_usd_max = pulumi.Output.from_input(most) if most is not None else None
        self.scalable_target = scaling.resource_id if scaling is not None else None
        self.endpoint_deletes_at, self.ttl_dead_letter_queue_url = (
            self._delete_after(name, ttl, endpoint, ttl_parts, region, aws_environment)
            if ttl is not None and ttl_parts is not None else (None, None))
        guards = [cost_guard("endpointTtl", settings.endpoint_ttl.strip() if ttl is not None else None,
                             f"EventBridge Scheduler deletes the endpoint {settings.endpoint_ttl.strip()} after its "
                             "creation", "nothing deletes the endpoint: it bills until `pulumi destroy`",
                             cost_per_hour_usd(settings, settings.instances_max))]
        warn_guards_off(guards, self)
        self.cost_guards = pulumi.Output.from_input(guards)
        warn_unpinned(serving, self)
        self.model_revision = pulumi.Output.from_input(serving.revision or "") if serving.from_hub else None
        body = json.dumps({"model": serving.served_model_name, "max_tokens": 64,
                           "messages": [{"role": "user", "content": "Name the four inner planets."}]})
        self._register_contract(
            cloud="sagemaker",
            port=catalog.SAGEMAKER_CONTAINER_PORT,
            served_model_name=serving.served_model_name,
            target=pulumi.Output.all(endpoint.name, profile).apply(
                lambda found: {"endpoint_name": found[0], "region": region,
                               **({"profile": found[1]} if found[1] else {}),
                               # What marks the stack's endpoints (scope.py): status lists the others it marks.
                               "stack_tags": StackScope.current().tags()}),
            connect_command=endpoint.name.apply(lambda found: shlex.join([
                "aws", "sagemaker-runtime", "invoke-endpoint", "--region", region, "--endpoint-name", found,
                "--content-type", "application/json", "--cli-binary-format", "raw-in-base64-out", "--body", body,
                "/dev/stdout"])),
            cost_per_hour_usd=cost_per_hour_usd(settings),
            billing_after_destroy_usd_per_month=billing_after_destroy_usd_per_month(settings),
        )

    def _account_check(self, name: str, settings: SageMakerT4EndpointSettings, region: str,
                       environment: pulumi.Output[dict[str, str]], fleet: str) -> command.local.Command:
        """CodeBuild's build quota and the endpoint quota, asked at `up` (not at preview) before the image
        build (steps/account_check.py). It runs again whenever the fleet's key changes (fleet.py: the rule that
        names a new fleet's resources), and when autoscaling's most or fleetChange does."""
        scope = StackScope.current()
        request = account_check.CheckRequest(
            stack=scope.stack, project=scope.project, organization=scope.organization,
            instance_type=settings.instance_type,
            instances=settings.instance_count, most=settings.instances_max,
            # No CodeBuild quota to check when the image is built on this machine.
            compute_type=catalog.CODEBUILD_COMPUTE_TYPE if settings.image_builder == ImageBuilder.CODEBUILD else "",
            tag=image_tag(catalog.PINS["vllm.sagemaker"], settings.base_image), fleet=fleet,
            single=settings.fleet_change == FleetChange.SINGLE)
        return command.local.Command(
            f"{name}-account-check",
            create=account_check.command(),
            environment=step_environment(environment, region, pulumi.Output.from_input(None).apply(
                lambda _: request)),
            triggers=[request.encode()],
            opts=pulumi.ResourceOptions(parent=self))

    def _watch_endpoint(self, name: str, config: aws.sagemaker.EndpointConfiguration, region: str,
                        environment: pulumi.Output[dict[str, str]], fallbacks: list[str], name_prefix: str,
                        log_retention_days: int) -> command.local.Command:
        """Beside the endpoint's creation from CONFIG: one that fails to reach InService is deleted, its log group
        given a retention, its FailureReason printed (steps/endpoint_watch.py)."""
        request = config.name.apply(lambda config_name: endpoint_watch.WatchRequest(
            config_name=config_name, name_prefix=name_prefix, fallbacks=tuple(fallbacks),
            log_retention_days=log_retention_days))
        return command.local.Command(
            f"{name}-endpoint-watch",
            create=endpoint_watch.command(),
            environment=step_environment(environment, region, request),
            triggers=[config.name],
            opts=pulumi.ResourceOptions(parent=self, depends_on=[config]))

    def _endpoint_logs(self, name: str, fleet: str, endpoint: pulumi.Input[str], retention_days: int,
                       tags: dict[str, str]) -> aws.cloudwatch.LogGroup:
        """The group SageMaker writes the endpoint's container logs to, made by the stack before the endpoint (so
        that SageMaker finds it instead of making one that never expires), with a retention; destroy deletes it,
        after the endpoint. A new endpoint (a new configuration) gets a new group; the old one's goes with it."""
        return aws.cloudwatch.LogGroup(
            f"{name}-endpoint-logs-{fleet_id(fleet)}",
            name=pulumi.Output.from_input(endpoint).apply(
                lambda found: catalog.SAGEMAKER_ENDPOINT_LOG_GROUP.format(endpoint=found)),
            retention_in_days=retention_days, tags=tags,
            opts=pulumi.ResourceOptions(parent=self, aliases=[pulumi.Alias(name=f"{name}-endpoint-logs")]))

    def _token_secret(self, name: str, token: pulumi.Input[str], tags: dict[str, str]
                      ) -> tuple[aws.secretsmanager.Secret, aws.secretsmanager.SecretVersion]:
        """The Hugging Face token in a Secrets Manager secret of the stack, so that neither the model (which
        DescribeModel shows) nor the endpoint carries it. Deleted at destroy without a recovery window: the stack
        config still holds the token, and a secret waiting out its window would outlive the stack."""
        child = pulumi.ResourceOptions(parent=self)
        secret = aws.secretsmanager.Secret(f"{name}-hf-token", description="Hugging Face token of the gemma4-t4 "
                                           "endpoint, read by its container at start", recovery_window_in_days=0,
                                           tags=tags, opts=child)
        version = aws.secretsmanager.SecretVersion(f"{name}-hf-token-value", secret_id=secret.id,
                                                   secret_string=pulumi.Output.secret(token), opts=child)
        return secret, version

    def _autoscale(self, name: str, args: SageMakerT4EndpointSettings, endpoint: aws.sagemaker.Endpoint,
                   tags: dict[str, str]) -> aws.appautoscaling.Target:
        """The variant as an Application Auto Scaling target between the fewest and the most
        instances, and a target-tracking policy that keeps the metric at the target per instance.

        Registered once the endpoint is in service (the target reads the endpoint's name, and the
        endpoint resource is created only when SageMaker reports InService). The scale-out cooldown
        is the time a new instance may take to answer /ping: until it serves, the metric still shows
        the old load, and the policy would otherwise add instances for load already being met."""
        target = aws.appautoscaling.Target(
            f"{name}-scaling",
            service_namespace=catalog.SAGEMAKER_SCALING_NAMESPACE,
            scalable_dimension=catalog.SAGEMAKER_SCALABLE_DIMENSION,
            resource_id=endpoint.name.apply(lambda endpoint_name: catalog.sagemaker_scalable_resource_id(
                endpoint_name, VARIANT)),
            min_capacity=args.instances_min,
            max_capacity=args.instances_max,
            tags=tags,
            opts=pulumi.ResourceOptions(parent=self),
        )
        aws.appautoscaling.Policy(
            f"{name}-scaling-policy",
            policy_type="TargetTrackingScaling",
            service_namespace=target.service_namespace,
            scalable_dimension=target.scalable_dimension,
            resource_id=target.resource_id,
            target_tracking_scaling_policy_configuration=aws.appautoscaling.PolicyTargetTrackingScalingPolicyConfigurationArgs(
                target_value=args.scaling_target_value,
                predefined_metric_specification=aws.appautoscaling.
                PolicyTargetTrackingScalingPolicyConfigurationPredefinedMetricSpecificationArgs(
                    predefined_metric_type=catalog.SAGEMAKER_SCALING_METRICS[args.scaling_metric]),
                scale_out_cooldown=args.startup_health_check_timeout_seconds,
            ),
            opts=pulumi.ResourceOptions(parent=self),
        )
        pulumi.log.info(f"autoscaling: {args.instances_min} to {args.instances_max} x {args.instance_type}, keeping "
                        f"{args.scaling_metric} at {args.scaling_target_value:g} per instance", resource=self)
        return target

    def _ttl_before_create(self, name: str, ttl: timedelta, endpoint_name: pulumi.Output[str], region: str,
                           account: pulumi.Output[str], config: aws.sagemaker.EndpointConfiguration,
                           tags: dict[str, str], autoscaling: bool) -> TtlParts:
        """What deletes the endpoint, made before CreateEndpoint is called: the dead-letter queue, the role that
        may delete only this endpoint (by its name, known from the configuration's), and the backstop schedule,
        from a clock read just before the create: that clock plus the longest the provider waits for InService,
        the TTL and the backstop's hour. An `up` stopped during the endpoint's wait (Ctrl-C, a crash, a lost
        laptop) leaves this schedule behind, and it deletes the endpoint.

        Its clock is read once per endpoint name (the clock's trigger), so the backstop is armed when a configuration
        first gets its endpoint. A later endpoint under the same name (after the TTL deleted the first: `pulumi
        refresh`, `pulumi up`) cannot be seen before it exists and gets no new backstop; its first schedule is
        re-armed from its own CreationTime on every `up` (_delete_after)."""
        child = pulumi.ResourceOptions(parent=self)
        dead_letters = aws.sqs.Queue(f"{name}-ttl-dlq", message_retention_seconds=DLQ_RETENTION_S,
                                     sqs_managed_sse_enabled=True, tags=tags, opts=child)
        # The aws partition's ARN: a region of another partition is refused at preview (settings' region).
        endpoint_arn = pulumi.Output.all(endpoint_name, account).apply(
            lambda found: f"arn:{catalog.AWS_PARTITION}:sagemaker:{region}:{found[1]}:endpoint/{found[0].lower()}")
        statements: list[dict[str, pulumi.Input]] = [
            {"Effect": "Allow", "Action": "sagemaker:DeleteEndpoint", "Resource": endpoint_arn},
            {"Effect": "Allow", "Action": "sqs:SendMessage", "Resource": dead_letters.arn}]
        if autoscaling:
            # Deleting an autoscaled endpoint deregisters its target with the caller's rights, and fails
            # without them. AWS's page asks for the action, not for a target's ARN (SageMaker developer guide,
            # "Delete endpoints configured for auto scaling", endpoint-delete-with-scaling.html, read
            # 2026-12-04): the check is made by Application Auto Scaling on SageMaker's behalf. It lets the
            # role stop autoscaling, nothing more; DeleteEndpoint stays this endpoint's alone.
            statements.append({"Effect": "Allow", "Action": "application-autoscaling:DeregisterScalableTarget",
                               "Resource": "*"})
        role, policy = service_role(f"{name}-ttl", "scheduler.amazonaws.com", statements, tags, self,
                                    scheduler_trust(region, account))
        target = delete_target(endpoint_name, role, dead_letters)
        requested = command.local.Command(f"{name}-endpoint-requested-at", create=CLOCK, triggers=[endpoint_name],
                                          opts=pulumi.ResourceOptions(parent=self, depends_on=[config]))
        # The backstop: the same delete again, later. A delete refused while the endpoint is Updating is a 4xx,
        # and whether Scheduler retries a universal target's 4xx is undocumented; if it does not, the first
        # attempt goes to the dead-letter queue and only the backstop deletes the endpoint. After a delete that
        # worked, the backstop's finds no endpoint and lands in the queue (status reads past it).
        backstop = aws.scheduler.Schedule(
            f"{name}-ttl-backstop",
            schedule_expression=requested.stdout.apply(lambda at: one_time_expression(
                at, CREATE_WAIT + ttl + TTL_BACKSTOP, f"{name}-endpoint-requested-at")),
            schedule_expression_timezone="UTC",
            flexible_time_window=aws.scheduler.ScheduleFlexibleTimeWindowArgs(mode="OFF"),
            target=target,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[policy]))
        return TtlParts(backstop, role, policy, dead_letters)

    def _delete_after(self, name: str, ttl: timedelta, endpoint: aws.sagemaker.Endpoint, parts: TtlParts,
                      region: str, environment: pulumi.Output[dict[str, str]]
                      ) -> tuple[pulumi.Output[str], pulumi.Output[str]]:
        """EventBridge Scheduler deletes the endpoint ``ttl`` after its creation (SageMaker's CreationTime: the
        ~13 minutes of creating count), with the role that can do only that, retries, and the dead-letter queue for
        a delete that kept failing: the deadline the backstop (made before the create) gave is tightened to it.

        The deadline is the endpoint's own: its CreationTime, read on every `pulumi up` and preview once the
        endpoint exists (steps/created_at.py, a local run invoke). State cannot hold it: after the TTL fired,
        `pulumi refresh` drops the endpoint and `pulumi up` creates a new one under the same name, and an endpoint
        adopted after a Ctrl-C (`pulumi refresh --import-pending-creates`) was created long before the `up` that
        records it; either gets the deadline its own creation gives. After the TTL fired, an `up` without a refresh
        stops at that step with the line that says to refresh (the state still lists the endpoint SageMaker no
        longer has); `pulumi destroy` needs none. A deadline that moves into the past (a lowered endpointTtl)
        deletes the endpoint during that `up` (steps/ttl_passed.py): whether Scheduler ever fires a one-time
        schedule set in the past is not documented."""
        # The request waits for the endpoint's ARN: until the endpoint exists in this deployment (a preview of its
        # creation), the invoke's input is unknown and so is its answer (pulumi/runtime/invoke.py), never an error.
        request = pulumi.Output.all(endpoint.name, endpoint.arn).apply(
            lambda found: created_at.CreatedAtRequest(endpoint_name=found[0]))
        # It runs on every preview and `up`: only its stderr (a failure's line) is logged, not the time it prints.
        created = command.local.run_output(command=created_at.command(),
                                           environment=step_environment(environment, region, request),
                                           logging=command.local.Logging.STDERR,
                                           opts=pulumi.InvokeOutputOptions(parent=self))
        deletes_at = created.stdout.apply(lambda at: (clock_time(at, created_at.NAME) + ttl)
                                          .strftime(created_at.TIME_FORMAT))
        passed = command.local.Command(
            f"{name}-ttl-passed", create=ttl_passed.command(),
            environment=step_environment(environment, region, pulumi.Output.all(endpoint.name, deletes_at).apply(
                lambda found: ttl_passed.TtlRequest(endpoint_name=found[0], deletes_at=found[1]))),
            triggers=[deletes_at],
            opts=pulumi.ResourceOptions(parent=self, depends_on=[endpoint]))
        # This schedule and its right to delete follow the endpoint resource, not the name made before it: while a
        # change's new endpoint is created, they still delete the old one at its deadline (if the new one fails,
        # the old one serves on with its TTL); the backstop and the first policy already name the new one.
        in_service = aws.iam.RolePolicy(f"{name}-ttl-in-service-policy", role=parts.role.id,
                                        policy=pulumi.Output.json_dumps({"Version": "2012-10-17", "Statement": [
                                            {"Effect": "Allow", "Action": "sagemaker:DeleteEndpoint",
                                             "Resource": endpoint.arn}]}),
                                        opts=pulumi.ResourceOptions(parent=self))
        # A deadline already past is acted on before the schedule is moved to it.
        aws.scheduler.Schedule(
            f"{name}-ttl",
            schedule_expression=deletes_at.apply(functools.partial(one_time_expression, after=timedelta(0))),
            schedule_expression_timezone="UTC",
            flexible_time_window=aws.scheduler.ScheduleFlexibleTimeWindowArgs(mode="OFF"),
            target=delete_target(endpoint.name, parts.role, parts.dead_letters),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[parts.policy, in_service, passed]),
        )
        return deletes_at, parts.dead_letters.url

