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

The constructor names its steps; each concern is a module of this folder (docs/architecture.md): checks.py (what
is refused before anything is registered), image.py (the clamped image), access.py (the roles), server.py (the
model, configuration and endpoint), scaling.py, ttl.py and guards.py (what stops the bill), cost.py and outputs.py.
"""

from typing import cast

import pulumi
import pulumi_aws as aws

from gemma4_t4 import catalog

from ..base import (
    CostGuard,
    MemoryPlan,
    ServingArgs,
    T4ServingComponent,
    provider_for,
    refusals,
    type_token,
    warn_guards_off,
    with_alias,
)
from ..serving import ServingPlan, warn_unpinned
from . import cost
from .access import account_of, build_environment, execution_role
from .checks import CheckedArgs, account_check_step, check_endpoint_args
from .container import container_environment
from .fleet import fleet_key
from .guards import cost_guards
from .image import TuringImage
from .names import default_prefix
from .outputs import connect_command, contract_target
from .scaling import autoscale
from .server import serving_endpoint, serving_model, token_secret
from .settings import FleetChange, ImageBuilder, SageMakerT4EndpointSettings, ScalingMetric
from .ttl import TtlParts, delete_after

# Where these lived before the component was split by concern (tests and callers import them from here).
__all__ = ["SageMakerT4Endpoint", "SageMakerT4EndpointArgs"]


# Before 0.3.0 the component was registered under this type; the alias keeps deployed stacks' resources.
LEGACY_TYPE = "gemma4-t4:aws:SageMakerT4Endpoint"


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
    ttl_alarm_email: str
    """With endpointTtl: an e-mail address the alarm writes to when EventBridge Scheduler gave up deleting the
    endpoint at its TTL (the endpoint still bills). SNS sends a confirmation mail first: the address must confirm it.
    Default: none (the alarm notifies its SNS topic, ttl_alarm_topic_arn, for your own subscription)."""
    log_retention_days: int
    """Days CloudWatch keeps the endpoint's logs (/aws/sagemaker/Endpoints/NAME, which destroy deletes): one of
    CloudWatch's retentions (1, 3, 5, 7, 14, 30, 60, 90, ... 3653)."""


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
    """With endpointTtl: the queue where the TTL's delete lands when it kept failing (then the endpoint still bills,
    and the alarm on this queue notifies ttl_alarm_topic_arn)."""
    ttl_backstop_dead_letter_queue_url: pulumi.Output[str] | None
    """With endpointTtl: the backstop's queue; after a delete that worked, the backstop's finds no endpoint and lands
    here (harmless: no alarm watches it; `status` counts a letter only while the endpoint it names still exists)."""
    ttl_alarm_topic_arn: pulumi.Output[str] | None
    """With endpointTtl: the SNS topic the alarm on a failed TTL delete notifies (ttlAlarmEmail subscribes to it)."""
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
        with refusals(SageMakerT4EndpointArgs.__name__):
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
        hf_secret = token_secret(name, settings.hf_token, tags, self) if settings.hf_token is not None else None
        role_arn, model_waits_for = execution_role(name, settings, image, region, account, prefix, hf_secret, tags,
                                                   self)
        if hf_secret is not None:
            # The ARN only: the image's entrypoint reads the token at start (turing/hf_token_entrypoint.py).
            environment[catalog.HF_TOKEN_SECRET_ENV] = hf_secret[0].arn
            model_waits_for.append(hf_secret[1])
        model = serving_model(name, fleet, role_arn, image.image_uri, environment, tags, model_waits_for, self)
        endpoint, ttl_parts = serving_endpoint(name, settings, checked.ttl, model, fleet, region, account,
                                               aws_environment, tags, self)
        scaling = autoscale(name, settings, endpoint, tags, self) if settings.autoscaling else None
        self.endpoint_name = endpoint.name
        self.image_uri = image.image_uri
        self.hf_token_secret_arn = hf_secret[0].arn if hf_secret is not None else None
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
        account_check = account_check_step(name, settings, region, aws_environment, fleet, self)
        return TuringImage(f"{name}-image", {
            "base_image": settings.base_image, "vllm_version": catalog.PINS["vllm.sagemaker"], "region": region,
            "keep_images": settings.keep_images, "name_prefix": settings.name_prefix or default_prefix(name),
            "tags": settings.labels, "build_environment": aws_environment, "image_builder": settings.image_builder},
            opts=pulumi.ResourceOptions(parent=self, depends_on=[account_check]))

    def _set_outputs(self, name: str, settings: SageMakerT4EndpointSettings, checked: CheckedArgs,
                     endpoint: aws.sagemaker.Endpoint, ttl_parts: TtlParts | None,
                     scaling: aws.appautoscaling.Target | None, aws_environment: pulumi.Output[dict[str, str]],
                     profile: pulumi.Output[str | None]) -> None:
        """The optional outputs (None when the endpoint has no such part), the cost guards, and the contract."""
        plan, ttl, region, serving = checked.plan, checked.ttl, checked.region, checked.plan.serving
        self.memory_plan = pulumi.Output.from_input(cast(MemoryPlan, plan.memory.as_output())) if plan.memory else None
        # Outputs of what this endpoint has: None (not exported) for autoscaling and a TTL it was not given.
        most = cost.cost_per_hour_usd(settings, settings.instances_max) if scaling is not None else None
        self.cost_per_hour_usd_max = pulumi.Output.from_input(most) if most is not None else None
        self.scalable_target = scaling.resource_id if scaling is not None else None
        outputs = (delete_after(name, ttl, endpoint, ttl_parts, region, aws_environment, self)
                   if ttl is not None and ttl_parts is not None else None)
        self.endpoint_deletes_at = outputs.deletes_at if outputs else None
        self.ttl_dead_letter_queue_url = outputs.dead_letter_queue_url if outputs else None
        self.ttl_backstop_dead_letter_queue_url = outputs.backstop_dead_letter_queue_url if outputs else None
        self.ttl_alarm_topic_arn = outputs.alarm_topic_arn if outputs else None
        guards = cost_guards(settings, ttl)
        warn_guards_off(guards, self)
        self.cost_guards = pulumi.Output.from_input(guards)
        warn_unpinned(serving, self)
        self.model_revision = pulumi.Output.from_input(serving.revision or "") if serving.from_hub else None
        self._register_contract(
            cloud="sagemaker",
            port=catalog.SAGEMAKER_CONTAINER_PORT,
            served_model_name=serving.served_model_name,
            target=contract_target(endpoint, region, profile),
            connect_command=connect_command(endpoint, region, serving.served_model_name),
            cost_per_hour_usd=cost.cost_per_hour_usd(settings),
            billing_after_destroy_usd_per_month=cost.billing_after_destroy_usd_per_month(settings),
        )
