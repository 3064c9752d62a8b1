"""SageMaker: Gemma 4 on an ml.g4dn.xlarge (one Tesla T4) endpoint, on the clamped image.

The host image is pinned: the CUDA 13 vLLM container needs driver 580, which only
al2023-ami-sagemaker-inference-gpu-4-1 has. Without the pin the endpoint sat in Creating for six
minutes and failed with CannotStartContainerError and no log group at all (seed 002).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

import pulumi
import pulumi_aws as aws

from gemma4_t4 import catalog

from .aws_iam import service_role
from .errors import ConfigError
from .image_build import ImageBuildArgs, TuringImage
from .serving import ServingConfig

HEALTH_CHECK_RANGE_S = (60, 3600)  # what SageMaker accepts for both timeouts
MIN_TTL_AHEAD = timedelta(minutes=15)  # an endpoint takes ~13 min to come up (seed 002)
DELETE_ENDPOINT_TARGET = "arn:aws:scheduler:::aws-sdk:sagemaker:deleteEndpoint"


@dataclass(frozen=True)
class SageMakerT4Settings:
    region: str
    instance_type: str
    instance_count: int
    inference_ami_version: str
    base_image: str
    startup_health_check_timeout_s: int
    model_data_download_timeout_s: int
    keep_images: bool
    allow_non_t4_instance: bool = False
    endpoint_ttl: str = ""  # UTC time at which EventBridge Scheduler deletes the endpoint; "" = never

    def gpu(self) -> catalog.Gpu | None:
        return catalog.TESLA_T4 if self.instance_type in catalog.SAGEMAKER_T4_INSTANCE_TYPES else None

    def validate(self) -> None:
        if not self.base_image.strip():
            raise ConfigError("baseImage", "the base image is empty",
                              f"pulumi config set gemma4-t4:baseImage {catalog.PINS['sagemaker.base_image']}")
        if self.instance_type not in catalog.SAGEMAKER_T4_INSTANCE_TYPES and not self.allow_non_t4_instance:
            raise ConfigError("instanceType", f"{self.instance_type} does not carry a Tesla T4, the GPU this "
                              "project is built and priced for", "pulumi config set gemma4-t4:instanceType "
                              "ml.g4dn.xlarge, or opt in with pulumi config set gemma4-t4:allowNonT4Instance true")
        if self.instance_count < 1:
            raise ConfigError("instanceCount", f"must be at least 1, got {self.instance_count}",
                              "pulumi config set gemma4-t4:instanceCount 1")
        for key, value in (("startupHealthCheckTimeoutSeconds", self.startup_health_check_timeout_s),
                           ("modelDataDownloadTimeoutSeconds", self.model_data_download_timeout_s)):
            low, high = HEALTH_CHECK_RANGE_S
            if not low <= value <= high:
                raise ConfigError(key, f"{value} s is outside SageMaker's {low}-{high} s",
                                  f"pulumi config set gemma4-t4:{key} 900")
        self._validate_host_image()
        self.ttl()

    def ttl(self, now: datetime | None = None) -> datetime | None:
        if not self.endpoint_ttl:
            return None
        now = now or datetime.now(timezone.utc)
        example = (now + timedelta(hours=8)).strftime("%Y-%m-%dT%H:00:00Z")
        fix = f"pulumi config set gemma4-t4:endpointTtl {example} (UTC, in the future), or \"\" for none"
        try:
            when = datetime.fromisoformat(self.endpoint_ttl.replace("Z", "+00:00"))
        except ValueError:
            raise ConfigError("endpointTtl", f"{self.endpoint_ttl!r} is not an ISO 8601 time", fix) from None
        if when.tzinfo is None:
            raise ConfigError("endpointTtl", f"{self.endpoint_ttl!r} has no time zone", fix)
        when = when.astimezone(timezone.utc)
        if when < now + MIN_TTL_AHEAD:
            raise ConfigError("endpointTtl", f"{when:%Y-%m-%dT%H:%M:%SZ} is in the past or less than "
                              f"{MIN_TTL_AHEAD.seconds // 60} min away", fix)
        return when

    def _validate_host_image(self) -> None:
        host = catalog.SAGEMAKER_AMIS.get(self.inference_ami_version)
        pin = catalog.PINS["sagemaker.ami"]
        if host is None:
            raise ConfigError("inferenceAmiVersion", f"unknown host image {self.inference_ami_version!r} "
                              f"(known: {', '.join(sorted(catalog.SAGEMAKER_AMIS))})",
                              f"pulumi config set gemma4-t4:inferenceAmiVersion {pin}")
        needed = catalog.cuda_required_by_image(self.base_image)
        if needed is not None and host.cuda < needed:
            raise ConfigError(
                "inferenceAmiVersion",
                f"{self.inference_ami_version} has driver {host.driver_branch} (CUDA {host.cuda[0]}.{host.cuda[1]}), "
                f"but the image needs CUDA {needed[0]}.{needed[1]}: the endpoint would fail with "
                "CannotStartContainerError and no logs",
                f"pulumi config set gemma4-t4:inferenceAmiVersion {pin}")

    def cost_per_hour_usd(self) -> float | None:
        price = catalog.SAGEMAKER_PRICES.get(self.instance_type)
        return None if price is None else round(price.usd_per_hour * self.instance_count, 4)

    def billing_after_destroy_usd_per_month(self) -> float:
        if not self.keep_images:
            return 0.0
        return round(catalog.SAGEMAKER_IMAGE_BYTES / 1e9 * catalog.AWS_PRICES["ecr:gb-month"].usd_per_hour, 2)


@dataclass
class SageMakerT4EndpointArgs:
    serving: ServingConfig
    settings: SageMakerT4Settings
    hf_token: pulumi.Input[str] | None = None
    tags: dict[str, str] = field(default_factory=dict)


class SageMakerT4Endpoint(pulumi.ComponentResource):
    endpoint_name: pulumi.Output[str]
    image_uri: pulumi.Output[str]
    invoke_example: pulumi.Output[str]

    def __init__(self, name: str, args: SageMakerT4EndpointArgs, opts: pulumi.ResourceOptions | None = None):
        settings, serving = args.settings, args.serving
        settings.validate()
        serving.validate(settings.gpu())
        super().__init__("gemma4-t4:aws:SageMakerT4Endpoint", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        tags = {"app": "gemma4-t4", **args.tags}

        image = TuringImage(f"{name}-image", ImageBuildArgs(
            base_image=settings.base_image, vllm_version=catalog.PINS["vllm.sagemaker"], region=settings.region,
            keep_images=settings.keep_images, tags=tags), opts=child)

        role, role_policy = service_role(f"{name}-execution", "sagemaker.amazonaws.com", [
                {"Sid": "EcrLogin", "Effect": "Allow", "Action": "ecr:GetAuthorizationToken", "Resource": "*"},
                {"Sid": "PullImage", "Effect": "Allow",
                 "Action": ["ecr:BatchCheckLayerAvailability", "ecr:GetDownloadUrlForLayer", "ecr:BatchGetImage"],
                 "Resource": image.repository_arn},
                {"Sid": "EndpointLogs", "Effect": "Allow",
                 "Action": ["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents",
                            "logs:DescribeLogStreams"],
                 "Resource": f"arn:aws:logs:{settings.region}:*:log-group:/aws/sagemaker/Endpoints/*"},
                {"Sid": "Metrics", "Effect": "Allow", "Action": "cloudwatch:PutMetricData", "Resource": "*",
                 "Condition": {"StringEquals": {"cloudwatch:namespace": "/aws/sagemaker/Endpoints"}}},
            ], tags, self)

        environment: dict[str, pulumi.Input[str]] = dict(serving.sagemaker_environment())
        if args.hf_token is not None:
            environment["HF_TOKEN"] = pulumi.Output.secret(args.hf_token)
        model = aws.sagemaker.Model(
            f"{name}-model",
            execution_role_arn=role.arn,
            primary_container=aws.sagemaker.ModelPrimaryContainerArgs(image=image.image_uri, environment=environment),
            tags=tags,
            # The Model pulls the built image by digest: it must wait for the build and the role.
            opts=pulumi.ResourceOptions(parent=self, depends_on=[image.build, role_policy]),
        )
        config = aws.sagemaker.EndpointConfiguration(
            f"{name}-config",
            production_variants=[aws.sagemaker.EndpointConfigurationProductionVariantArgs(
                variant_name="AllTraffic",
                model_name=model.name,
                instance_type=settings.instance_type,
                initial_instance_count=settings.instance_count,
                inference_ami_version=settings.inference_ami_version,
                container_startup_health_check_timeout_in_seconds=settings.startup_health_check_timeout_s,
                model_data_download_timeout_in_seconds=settings.model_data_download_timeout_s,
            )],
            tags=tags,
            opts=child,
        )
        endpoint = aws.sagemaker.Endpoint(f"{name}-endpoint", endpoint_config_name=config.name, tags=tags, opts=child)

        ttl = settings.ttl()
        if ttl is not None:
            self._delete_at(name, ttl, endpoint, tags)

        self.endpoint_name = endpoint.name
        self.image_uri = image.image_uri
        self.cost_per_hour_usd = settings.cost_per_hour_usd()
        self.billing_after_destroy_usd_per_month = settings.billing_after_destroy_usd_per_month()
        body = json.dumps({"model": serving.served_model_name, "max_tokens": 64,
                           "messages": [{"role": "user", "content": "Name the four inner planets."}]})
        self.invoke_example = pulumi.Output.concat(
            "aws sagemaker-runtime invoke-endpoint --region ", settings.region, " --endpoint-name ", endpoint.name,
            " --content-type application/json --cli-binary-format raw-in-base64-out --body '", body,
            "' /dev/stdout")
        self.register_outputs({"endpoint_name": self.endpoint_name, "image_uri": self.image_uri,
                               "invoke_example": self.invoke_example})

    def _delete_at(self, name: str, when: datetime, endpoint: aws.sagemaker.Endpoint, tags: dict[str, str]) -> None:
        """EventBridge Scheduler deletes the endpoint at ``when``, with a role that can do only that.
        (Run `pulumi refresh` afterwards: the stack still lists the endpoint.)"""
        role, policy = service_role(f"{name}-ttl", "scheduler.amazonaws.com", [
            {"Effect": "Allow", "Action": "sagemaker:DeleteEndpoint", "Resource": endpoint.arn}], tags, self)
        aws.scheduler.Schedule(
            f"{name}-ttl",
            schedule_expression=f"at({when:%Y-%m-%dT%H:%M:%S})",
            schedule_expression_timezone="UTC",
            flexible_time_window=aws.scheduler.ScheduleFlexibleTimeWindowArgs(mode="OFF"),
            target=aws.scheduler.ScheduleTargetArgs(
                arn=DELETE_ENDPOINT_TARGET, role_arn=role.arn,
                input=pulumi.Output.json_dumps({"EndpointName": endpoint.name})),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[policy]),
        )
