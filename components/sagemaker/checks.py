"""What the component checks before anything is registered (a refused setting creates no resource): the region, the
settings, the serving plan, the TTL and a kept image repository keepImages off would leave billing; and the account
check `pulumi up` runs before the image build (CodeBuild's build quota, the endpoint quota)."""

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pulumi
import pulumi_command as command

from gemma4_t4 import catalog

from ..config import validate
from ..serving import ServingPlan, check_serving
from .access import step_environment
from .build_context import image_tag
from .names import default_prefix
from .region import provider_region
from .scope import StackScope
from .settings import FleetChange, ImageBuilder, SageMakerT4EndpointSettings, check_sagemaker_region
from .steps import account_check
from .storage import kept_repository_name, refuse_unkeeping


@dataclass(frozen=True)
class CheckedArgs:
    """The arguments, checked whole before anything is registered."""

    settings: SageMakerT4EndpointSettings
    plan: ServingPlan
    region: str
    ttl: timedelta | None


def check_endpoint_args(name: str, args: Mapping[str, Any], opts: pulumi.ResourceOptions | None,
                        provider: pulumi.ProviderResource | None) -> CheckedArgs:
    """Everything a refusal needs, checked before anything is registered (the component refuses in the caller's
    words)."""
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


def account_check_step(name: str, settings: SageMakerT4EndpointSettings, region: str,
                       environment: pulumi.Output[dict[str, str]], fleet: str,
                       parent: pulumi.Resource) -> command.local.Command:
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
        opts=pulumi.ResourceOptions(parent=parent))
