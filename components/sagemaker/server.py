"""What serves: the model (the clamped image and its settings), the endpoint configuration and the endpoint made
from it, each fleet's own (named with its key, fleet.py), with the endpoint's log group, the watch beside its
creation, fleetChange single's step, and the Hugging Face token's secret."""

from __future__ import annotations

import functools
from datetime import timedelta
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_command as command

from gemma4_t4 import catalog

from .access import step_environment
from .names import VARIANT, default_prefix, endpoint_name, endpoint_name_start
from .scope import StackScope, fleet_id
from .settings import FleetChange, SageMakerT4EndpointSettings
from .steps import endpoint_watch, single_fleet
from .ttl import TtlParts, arm_before_create


def fallback_instance_types(instance_type: str) -> list[str]:
    """The other T4 instance types with as many T4s, smallest first: what to try when the region has no capacity
    for INSTANCE_TYPE ([sagemaker-t4-article] deployed with ml.g4dn.xlarge, then ml.g4dn.2xlarge)."""
    found = catalog.SAGEMAKER_INSTANCE_TYPES.get(instance_type)
    if found is None or instance_type not in catalog.SAGEMAKER_T4_INSTANCE_TYPES:
        return []
    same = [t for t in catalog.SAGEMAKER_T4_INSTANCE_TYPES
            if t != instance_type and catalog.SAGEMAKER_INSTANCE_TYPES[t].gpus == found.gpus]
    return sorted(same, key=lambda t: catalog.SAGEMAKER_INSTANCE_TYPES[t].vcpus)


def variant_of(settings: SageMakerT4EndpointSettings) -> dict[str, Any]:
    """The production variant's settings (each a fleet setting: fleet.FLEET)."""
    return {"instance_type": settings.instance_type, "initial_instance_count": settings.instance_count,
            "inference_ami_version": settings.inference_ami_version,
            "container_startup_health_check_timeout_in_seconds": settings.startup_health_check_timeout_seconds,
            "model_data_download_timeout_in_seconds": settings.model_data_download_timeout_seconds}


def serving_model(name: str, fleet: str, role_arn: pulumi.Input[str], image_uri: pulumi.Input[str],
                  environment: dict[str, pulumi.Input[str]], tags: dict[str, str], waits_for: list[pulumi.Resource],
                  parent: pulumi.Resource) -> aws.sagemaker.Model:
    """The model: the clamped image by digest, run as ROLE_ARN with the serving settings as its environment."""
    return aws.sagemaker.Model(
        f"{name}-model-{fleet_id(fleet)}",
        execution_role_arn=role_arn,
        primary_container=aws.sagemaker.ModelPrimaryContainerArgs(image=image_uri, environment=environment),
        tags=tags,
        # The Model pulls the built image by digest: it must wait for the build and the role.
        opts=pulumi.ResourceOptions(parent=parent, depends_on=waits_for, aliases=[pulumi.Alias(
            name=f"{name}-model")]),
    )


def serving_endpoint(name: str, settings: SageMakerT4EndpointSettings, ttl: timedelta | None,
                     model: aws.sagemaker.Model, fleet: str, region: str, account: pulumi.Output[str],
                     aws_environment: pulumi.Output[dict[str, str]], tags: dict[str, str], parent: pulumi.Resource
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
        opts=pulumi.ResourceOptions(parent=parent, aliases=[pulumi.Alias(name=f"{name}-config")]),
    )
    # The endpoint's name follows its configuration (see endpoint_name); the watch lists it by its start.
    physical_name = config.name.apply(functools.partial(endpoint_name, prefix))
    watch_endpoint(name, config, region, aws_environment, fallback_instance_types(settings.instance_type),
                   endpoint_name_start(prefix), settings.log_retention_days, parent)
    scope = StackScope.current().tags()
    log_group = endpoint_logs(name, fleet, physical_name, settings.log_retention_days, {**tags, **scope}, parent)
    # With a TTL, its delete schedule exists before CreateEndpoint is called (see ttl.delete_after).
    ttl_parts = arm_before_create(name, ttl, physical_name, region, account, config, tags, settings.autoscaling,
                                  settings.ttl_alarm_email, parent) if ttl is not None else None
    before = [log_group, *([ttl_parts.backstop] if ttl_parts else [])]
    single = settings.fleet_change == FleetChange.SINGLE
    if single:
        before.append(single_fleet_step(name, config, physical_name, fleet, region, aws_environment, parent))
    # The stack's tags (its organization, project and stack: scope.py) let preflight, status and the account check
    # find this stack's endpoints (a change holds two fleets, and an `up` stopped during the wait leaves one
    # outside the state) and no other stack's; the fleet tag says what it runs.
    endpoint = aws.sagemaker.Endpoint(
        f"{name}-endpoint-{fleet_id(fleet)}", name=physical_name, endpoint_config_name=config.name,
        tags={**tags, **scope, catalog.SAGEMAKER_FLEET_TAG: fleet},
        # A new configuration of the same fleet (what fleet.FLEET cannot see: a role given as an Output) replaces
        # the endpoint (its name follows the configuration) rather than updating it in place; see the module's
        # docstring. Its log group first: SageMaker would otherwise make one that never expires.
        opts=pulumi.ResourceOptions(parent=parent, replace_on_changes=["endpointConfigName"],
                                    delete_before_replace=single, depends_on=before,
                                    aliases=[pulumi.Alias(name=f"{name}-endpoint")]))
    return endpoint, ttl_parts


def watch_endpoint(name: str, config: aws.sagemaker.EndpointConfiguration, region: str,
                   environment: pulumi.Output[dict[str, str]], fallbacks: list[str], name_prefix: str,
                   log_retention_days: int, parent: pulumi.Resource) -> command.local.Command:
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
        opts=pulumi.ResourceOptions(parent=parent, depends_on=[config]))


def endpoint_logs(name: str, fleet: str, endpoint: pulumi.Input[str], retention_days: int,
                  tags: dict[str, str], parent: pulumi.Resource) -> aws.cloudwatch.LogGroup:
    """The group SageMaker writes the endpoint's container logs to, made by the stack before the endpoint (so
    that SageMaker finds it instead of making one that never expires), with a retention; destroy deletes it,
    after the endpoint. A new endpoint (a new configuration) gets a new group; the old one's goes with it."""
    return aws.cloudwatch.LogGroup(
        f"{name}-endpoint-logs-{fleet_id(fleet)}",
        name=pulumi.Output.from_input(endpoint).apply(
            lambda found: catalog.SAGEMAKER_ENDPOINT_LOG_GROUP.format(endpoint=found)),
        retention_in_days=retention_days, tags=tags,
        opts=pulumi.ResourceOptions(parent=parent, aliases=[pulumi.Alias(name=f"{name}-endpoint-logs")]))


def single_fleet_step(name: str, config: aws.sagemaker.EndpointConfiguration, endpoint: pulumi.Output[str],
                      fleet: str, region: str, aws_environment: pulumi.Output[dict[str, str]], parent: pulumi.Resource
                      ) -> command.local.Command:
    """fleetChange single: the stack's endpoints of another fleet are deleted before this fleet's endpoint is
    created (steps/single_fleet.py), once its image is built and its configuration made. Said at preview."""
    pulumi.log.warn("fleetChange single: a change that needs a new fleet deletes the serving endpoint before "
                    "it creates the new one; nothing serves until the new endpoint is InService (~13 minutes, "
                    "measured), nor at all if it fails. blueGreen (the default) keeps the old one serving, with "
                    "an endpoint quota for both fleets", resource=parent)
    scope = StackScope.current()
    request = endpoint.apply(lambda found: single_fleet.SingleFleetRequest(
        stack=scope.stack, fleet=fleet, endpoint_name=found, project=scope.project,
        organization=scope.organization))
    return command.local.Command(
        f"{name}-single-fleet", create=single_fleet.command(),
        environment=step_environment(aws_environment, region, request),
        triggers=[fleet], opts=pulumi.ResourceOptions(parent=parent, depends_on=[config]))


def token_secret(name: str, token: pulumi.Input[str], tags: dict[str, str], parent: pulumi.Resource
                 ) -> tuple[aws.secretsmanager.Secret, aws.secretsmanager.SecretVersion]:
    """The Hugging Face token in a Secrets Manager secret of the stack, so that neither the model (which
    DescribeModel shows) nor the endpoint carries it. Deleted at destroy without a recovery window: the stack
    config still holds the token, and a secret waiting out its window would outlive the stack."""
    child = pulumi.ResourceOptions(parent=parent)
    secret = aws.secretsmanager.Secret(f"{name}-hf-token", description="Hugging Face token of the gemma4-t4 "
                                       "endpoint, read by its container at start", recovery_window_in_days=0,
                                       tags=tags, opts=child)
    version = aws.secretsmanager.SecretVersion(f"{name}-hf-token-value", secret_id=secret.id,
                                               secret_string=pulumi.Output.secret(token), opts=child)
    return secret, version
