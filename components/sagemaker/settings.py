"""The SageMaker component's settings: SageMakerT4EndpointSettings (everything SageMakerT4Endpoint is built from)
and the rules only SageMaker has (its regions, instance types, host images, autoscaling, AWS's tag rules). The
rules every cloud shares are ServingSettings' (components/config/schema.py)."""

from __future__ import annotations

import difflib
import re
from datetime import timedelta
from enum import StrEnum
from typing import Any

from pydantic import Field, field_validator, model_validator

from gemma4_t4 import catalog
from gemma4_t4.errors import ConfigError, FixPart, Set, Unset

from ..config.schema import AnyInput, Flag, ServingSettings, _default_from_tensor_parallel, parse_ttl

HEALTH_CHECK_RANGE_S = (60, 3600)  # what SageMaker accepts for both timeouts (ProductionVariant API)
AWS_REGION = re.compile(r"[a-z]{2}(-gov)?-[a-z]+-\d")


class ImageBuilder(StrEnum):
    """Who builds the SageMaker image: AWS CodeBuild, or the machine that runs `pulumi up` (local: the first of
    buildah, podman and docker found; or the one named)."""

    CODEBUILD = "codebuild"
    LOCAL = "local"
    DOCKER = "docker"
    PODMAN = "podman"
    BUILDAH = "buildah"


class FleetChange(StrEnum):
    """How a change that needs a new fleet rolls out: blueGreen (the new endpoint beside the old one, which serves
    until the new one is InService: twice the instances for ~13 minutes) or single (the old endpoint deleted
    first: nothing serves until the new one is InService, and nothing if it fails; for an endpoint quota of one
    fleet)."""

    BLUE_GREEN = "blueGreen"
    SINGLE = "single"


class ScalingMetric(StrEnum):
    """What the SageMaker autoscaling policy tracks per instance."""

    CONCURRENT_REQUESTS = "concurrentRequests"
    INVOCATIONS = "invocations"


def _check_aws_tags(tags: dict[str, str]) -> None:
    # app=gemma4-t4 everywhere; the endpoint's organization, project, stack and fleet tags.
    own = ("app", catalog.SAGEMAKER_ORGANIZATION_TAG, catalog.SAGEMAKER_PROJECT_TAG, catalog.SAGEMAKER_STACK_TAG,
           catalog.SAGEMAKER_FLEET_TAG)
    user_max = catalog.AWS_MAX_TAGS - len(own)
    if len(tags) > user_max:
        raise ConfigError("labels", f"{len(tags)} tags, and AWS allows {catalog.AWS_MAX_TAGS} per resource "
                          f"including the project's own {', '.join(own)}",
                          (Unset("labels.NAME"), f" (keep {user_max})"))
    for name, value in tags.items():
        fix = (Unset(f"labels.{name}"), ", then set a tag that follows the rule")
        if name.lower().startswith(catalog.AWS_RESERVED_TAG_PREFIX):
            raise ConfigError(f"labels.{name}", "the aws: prefix is reserved for AWS's own tags", fix)
        if name == "app":
            raise ConfigError("labels", "app is the project's own tag (app=gemma4-t4)", "use another tag name")
        if not (0 < len(name) <= catalog.AWS_TAG_KEY_MAX and catalog.AWS_TAG_CHARS.fullmatch(name)):
            raise ConfigError(f"labels.{name}", f"tag key {name!r} breaks AWS's rule: 1-{catalog.AWS_TAG_KEY_MAX} "
                              "letters, digits, spaces and _ . : / = + - @", fix)
        if not (len(value) <= catalog.AWS_TAG_VALUE_MAX and catalog.AWS_TAG_CHARS.fullmatch(value)):
            raise ConfigError(f"labels.{name}", f"tag value {value[:40]!r} breaks AWS's rule: 0-"
                              f"{catalog.AWS_TAG_VALUE_MAX} letters, digits, spaces and _ . : / = + - @", fix)


def check_sagemaker_region(region: str, newer: tuple[FixPart, ...] = ()) -> None:
    """REGION is one SageMaker has, by botocore's endpoint data (the regions the SDK knows, every partition);
    else refused with the nearest (NEWER: what to do for a region newer than botocore)."""
    import botocore.session

    session = botocore.session.get_session()
    regions = {r for partition in session.get_available_partitions()
               for r in session.get_available_regions("sagemaker", partition)}
    if region in regions:
        return
    close = difflib.get_close_matches(region, sorted(regions), n=1, cutoff=0.6)
    raise ConfigError("region", f"{region!r} is not a region SageMaker has (botocore's endpoint data)"
                      + (f"; did you mean {close[0]}?" if close else ""),
                      (Set("region", close[0] if close else "us-east-2"), *newer))


class SageMakerT4EndpointSettings(ServingSettings):
    """Everything SageMakerT4Endpoint is built from."""

    region: str = ""
    profile: str = ""
    execution_role_arn: AnyInput = None
    image_build_environment: AnyInput = None
    instance_type: str = ""
    instance_count: int = Field(1, ge=1)
    min_instance_count: int = Field(0, ge=0)
    max_instance_count: int = Field(0, ge=0)
    scaling_metric: ScalingMetric = ScalingMetric.CONCURRENT_REQUESTS
    scaling_target: float = Field(0.0, ge=0, allow_inf_nan=False)
    allow_non_t4_instance: Flag = False
    inference_ami_version: str = catalog.PINS["sagemaker.ami"]
    base_image: str = catalog.PINS["sagemaker.base_image"]
    base_image_cuda: str = ""
    startup_health_check_timeout_seconds: int = Field(catalog.SAGEMAKER_DEFAULT_STARTUP_HEALTH_CHECK_S,
                                                      ge=HEALTH_CHECK_RANGE_S[0], le=HEALTH_CHECK_RANGE_S[1])
    model_data_download_timeout_seconds: int = Field(1800, ge=HEALTH_CHECK_RANGE_S[0], le=HEALTH_CHECK_RANGE_S[1])
    keep_images: Flag = False
    image_builder: ImageBuilder = ImageBuilder.CODEBUILD
    fleet_change: FleetChange = FleetChange.BLUE_GREEN
    endpoint_ttl: str = catalog.DEFAULT_ENDPOINT_TTL
    ttl_alarm_email: str = ""
    log_retention_days: int = 14

    @property
    def gpu(self) -> catalog.Gpu | None:
        return catalog.TESLA_T4 if self.instance_type in catalog.SAGEMAKER_T4_INSTANCE_TYPES else None

    @property
    def autoscaling(self) -> bool:
        return self.max_instance_count > 0

    @property
    def instances_min(self) -> int:
        return (self.min_instance_count or self.instance_count) if self.autoscaling else self.instance_count

    @property
    def instances_max(self) -> int:
        return self.max_instance_count if self.autoscaling else self.instance_count

    @property
    def scaling_target_value(self) -> float:
        """The policy's target per instance (scalingTarget, else maxNumSeqs concurrent requests)."""
        return self.scaling_target or float(self.max_num_seqs)

    def ttl(self) -> timedelta | None:
        return parse_ttl(self.endpoint_ttl)

    @model_validator(mode="before")
    @classmethod
    def _instance_for_the_gpus(cls, data: Any) -> Any:
        return _default_from_tensor_parallel(data, "instanceType", "instance_type", catalog.sagemaker_t4_instance_for)

    @model_validator(mode="after")
    def _aws_facts(self) -> SageMakerT4EndpointSettings:
        pin = catalog.PINS["sagemaker.ami"]
        instance = catalog.SAGEMAKER_INSTANCE_TYPES.get(self.instance_type)
        if instance is None:
            raise ConfigError("instanceType", f"{self.instance_type!r} is not a SageMaker instance type with an "
                              "NVIDIA GPU", Set("instanceType", "ml.g4dn.xlarge"))
        pick = catalog.sagemaker_t4_instance_for(self.tensor_parallel_size)
        if self.gpu is None and not self.allow_non_t4_instance:
            has = f"{instance.gpus} x {instance.gpu}"
            raise ConfigError("instanceType", f"{self.instance_type} carries {has}, not the Tesla T4 this project is "
                              "built and priced for", (Set("instanceType", pick), ", or opt in with ",
                                                       Set("allowNonT4Instance", True)))
        if self.gpu is None and self.dtype in ("bfloat16", "auto") and instance.gpu in catalog.NO_BFLOAT16_GPUS:
            raise ConfigError("dtype", f"'{self.dtype}' needs bfloat16, which the {instance.gpu} of "
                              f"{self.instance_type} (compute capability below 8.0) does not have",
                              Set("dtype", "float16"))
        if instance.gpus < self.tensor_parallel_size:
            raise ConfigError(
                "instanceType", f"{self.instance_type} carries {instance.gpus} GPU{'s' * (instance.gpus > 1)}, and "
                f"tensorParallelSize {self.tensor_parallel_size} splits the model over {self.tensor_parallel_size}",
                (Set("instanceType", pick), " (or ", Unset("instanceType"), ", which picks it)"))
        image = catalog.ECR_IMAGE.fullmatch(self.base_image)
        if image is None:
            raise ConfigError("baseImage", f"{self.base_image!r} is not a private ECR image "
                              "(ACCOUNT.dkr.ecr.REGION.amazonaws.com/NAME:TAG): SageMaker and the build pull from ECR",
                              Set("baseImage", catalog.PINS["sagemaker.base_image"]))
        host = catalog.SAGEMAKER_AMIS.get(self.inference_ami_version)
        if host is None:
            raise ConfigError("inferenceAmiVersion", f"unknown host image {self.inference_ami_version!r} "
                              f"(known: {', '.join(sorted(catalog.SAGEMAKER_AMIS))})",
                              Set("inferenceAmiVersion", pin))
        needed = self._base_image_cuda()
        if host.cuda < needed:
            raise ConfigError(
                "inferenceAmiVersion",
                f"{self.inference_ami_version} has driver {host.driver_branch} (CUDA {host.cuda[0]}.{host.cuda[1]}), "
                f"but the image needs CUDA {needed[0]}.{needed[1]}: the endpoint would fail with "
                "CannotStartContainerError and no logs", Set("inferenceAmiVersion", pin))
        self.ttl()
        self._check_autoscaling()
        _check_aws_tags(self.labels)
        return self

    def _base_image_cuda(self) -> tuple[int, int]:
        """The CUDA the base image needs: from its tag (-cuXYZ-), else as the user states it (baseImageCuda).
        Unknown is refused: the host image's driver could not be checked, and a mismatch fails the endpoint
        after the build, with CannotStartContainerError and no logs ([sagemaker-t4-article])."""
        from_tag = catalog.cuda_required_by_image(self.base_image)
        stated = None
        if self.base_image_cuda:
            match = re.fullmatch(r"(\d{1,2})\.(\d)", self.base_image_cuda.strip())
            if match is None:
                raise ConfigError("baseImageCuda", f"{self.base_image_cuda!r} is not a CUDA version (MAJOR.MINOR)",
                                  Set("baseImageCuda", "13.0"))
            stated = (int(match[1]), int(match[2]))
        if from_tag is not None and stated is not None and stated != from_tag:
            raise ConfigError("baseImageCuda", f"{self.base_image_cuda} contradicts the base image's tag, which says "
                              f"CUDA {from_tag[0]}.{from_tag[1]}", Unset("baseImageCuda"))
        found = stated or from_tag
        if found is None:
            raise ConfigError(
                "baseImageCuda", f"the CUDA that {self.base_image} needs cannot be read from it (no -cuXYZ- in a tag, "
                "e.g. a digest alone): the host image's driver cannot be checked against it. Read it from the "
                "image (NVIDIA_REQUIRE_CUDA) and state it", Set("baseImageCuda", "13.0"))
        return found

    @field_validator("startup_health_check_timeout_seconds")
    @classmethod
    def _startup_window(cls, seconds: int) -> int:
        least = catalog.SAGEMAKER_MIN_STARTUP_HEALTH_CHECK_S
        if HEALTH_CHECK_RANGE_S[0] <= seconds < least:
            raise ConfigError("startupHealthCheckTimeoutSeconds", f"{seconds} s is shorter than vLLM needs on a T4 to "
                              f"download, load and compile the model before it answers /ping (at least {least} s): "
                              "the endpoint would fail while still starting",
                              Set("startupHealthCheckTimeoutSeconds", catalog.SAGEMAKER_DEFAULT_STARTUP_HEALTH_CHECK_S))
        return seconds

    @field_validator("ttl_alarm_email")
    @classmethod
    def _alarm_email(cls, email: str) -> str:
        email = email.strip()
        # SNS takes any address and mails it a confirmation; one that is not an address is refused at `up`.
        if email and not re.fullmatch(r"[^@\s]+@[^@\s]+\.[^@\s]+", email):
            raise ConfigError("ttlAlarmEmail", f"{email!r} is not an e-mail address",
                              (Set("ttlAlarmEmail", "you@example.com"), " (or leave it empty: the alarm then "
                               "notifies only its SNS topic)"))
        return email

    @field_validator("log_retention_days")
    @classmethod
    def _log_retention(cls, days: int) -> int:
        allowed = catalog.CLOUDWATCH_LOG_RETENTION_DAYS
        if days not in allowed:
            # CloudWatch Logs would refuse it at `up`, after the image build; 0 (never expire) is what this
            # setting exists to avoid.
            near = min(allowed, key=lambda d: (abs(d - days), d))
            raise ConfigError("logRetentionDays", f"{days} is not a retention CloudWatch Logs takes (days: "
                              f"{', '.join(map(str, allowed))})", Set("logRetentionDays", near))
        return days

    def _check_autoscaling(self) -> None:
        defaults = type(self).model_fields
        if not self.autoscaling:
            for key, name in (("minInstanceCount", "min_instance_count"), ("scalingMetric", "scaling_metric"),
                              ("scalingTarget", "scaling_target")):
                if getattr(self, name) != defaults[name].default:
                    raise ConfigError(key, "sets autoscaling, which is off without maxInstanceCount",
                                      (Set("maxInstanceCount", max(self.instance_count + 1, 2)), " (or ",
                                       Unset(key), ")"))
            return
        if self.max_instance_count < self.instance_count:
            raise ConfigError("maxInstanceCount", f"{self.max_instance_count} is below instanceCount "
                              f"{self.instance_count}, the count the endpoint starts with",
                              Set("maxInstanceCount", self.instance_count))
        if self.min_instance_count > self.instance_count:
            raise ConfigError("minInstanceCount", f"{self.min_instance_count} is above instanceCount "
                              f"{self.instance_count}, the count the endpoint starts with",
                              (Set("instanceCount", self.min_instance_count), " (or ",
                               Set("minInstanceCount", self.instance_count), ")"))
        if self.scaling_metric == "invocations" and not self.scaling_target:
            raise ConfigError("scalingTarget", "invocations needs a target: the invocations per minute one instance "
                              "should serve (it depends on how long your requests take)",
                              (Set("scalingTarget", "N"), ", or track ", Set("scalingMetric", "concurrentRequests"),
                               " (its target defaults to maxNumSeqs)"))

    @field_validator("region")
    @classmethod
    def _region(cls, region: str) -> str:
        if region and not AWS_REGION.fullmatch(region):
            raise ConfigError("region", f"{region!r} is not an AWS region", Set("region", "us-east-2"))
        if partition := catalog.other_partition(region):
            raise ConfigError("region", f"{region} is in the {partition} partition: gemma4-t4 writes its IAM policies' "
                              f"ARNs for the {catalog.AWS_PARTITION} partition (arn:aws:...) and builds from the AWS "
                              "vLLM container in that partition's registry, so the roles would grant nothing there",
                              (Set("region", "us-east-2"), " (a region of the aws partition)"))
        return region
