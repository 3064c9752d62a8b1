"""Who may do what in the account: an IAM role that one AWS service may assume, on behalf of this account's resources
only, with one inline policy: the least-privilege shape every role here takes (no managed policies); the role the
endpoint's model runs as; and the AWS credentials the local steps (steps/) run with.

Each trust policy carries the conditions the service's own page documents against the cross-service confused
deputy (catalog: SAGEMAKER_TRUST_SOURCE_ARN, CODEBUILD_TRUST_SOURCE_ARN, SCHEDULER_TRUST_SOURCE_ARN, with their
sources), so that another account's resource cannot have the service act as this role."""

from __future__ import annotations

import json
from typing import Any, Protocol

import pulumi
import pulumi_aws as aws

from gemma4_t4 import catalog

from ..step import StepRequest
from .names import endpoint_log_groups
from .settings import SageMakerT4EndpointSettings


class ImageParts(Protocol):
    """What a role that pulls the image reads of it (image.TuringImage)."""

    @property
    def repository_arn(self) -> pulumi.Output[str]: ...

    @property
    def build(self) -> pulumi.Resource: ...


def account_of(arn: pulumi.Input[str]) -> pulumi.Output[str]:
    """The account of a resource by its ARN (arn:PARTITION:SERVICE:REGION:ACCOUNT:RESOURCE): the account the
    provider makes the stack's resources in, read without a call of its own."""
    return pulumi.Output.from_input(arn).apply(lambda found: found.split(":")[4] if found else found)


def sagemaker_trust(region: str, account: pulumi.Input[str]) -> pulumi.Output[dict[str, Any]]:
    """SageMaker inference: the ARN pattern its page gives, account and region filled in; no aws:SourceAccount
    (the page: the account is in the ARN) and nothing narrower (the page forbids a model's or endpoint's ARN)."""
    return pulumi.Output.from_input(account).apply(lambda found: {"ArnLike": {"aws:SourceArn": (
        catalog.SAGEMAKER_TRUST_SOURCE_ARN.format(partition=catalog.AWS_PARTITION, region=region, account=found))}})


def codebuild_trust(region: str, account: pulumi.Input[str], project: str) -> pulumi.Output[dict[str, Any]]:
    """CodeBuild: this account, and the projects named PROJECT (a pattern: the project is auto-named after the
    role is made)."""
    return pulumi.Output.from_input(account).apply(lambda found: {
        "StringEquals": {"aws:SourceAccount": found},
        "ArnLike": {"aws:SourceArn": catalog.CODEBUILD_TRUST_SOURCE_ARN.format(
            partition=catalog.AWS_PARTITION, region=region, account=found, project=project)}})


def scheduler_trust(region: str, account: pulumi.Input[str]) -> pulumi.Output[dict[str, Any]]:
    """EventBridge Scheduler: this account, and the schedule group the stack's schedules are in (the default)."""
    return pulumi.Output.from_input(account).apply(lambda found: {"StringEquals": {
        "aws:SourceAccount": found,
        "aws:SourceArn": catalog.SCHEDULER_TRUST_SOURCE_ARN.format(
            partition=catalog.AWS_PARTITION, region=region, account=found, group=catalog.SCHEDULER_DEFAULT_GROUP)}})


def service_role(name: str, service: str, statements: list[dict[str, Any]], tags: dict[str, str],
                 parent: pulumi.Resource, trust: pulumi.Input[dict[str, Any]]
                 ) -> tuple[aws.iam.Role, aws.iam.RolePolicy]:
    """Role ``name`` trusted by ``service`` (e.g. "sagemaker.amazonaws.com") under the condition ``trust``, and its
    policy ``name-policy``."""
    child = pulumi.ResourceOptions(parent=parent)
    role = aws.iam.Role(name, assume_role_policy=pulumi.Output.from_input(trust).apply(lambda condition: json.dumps({
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Principal": {"Service": service}, "Action": "sts:AssumeRole",
                       "Condition": condition}]})),
        tags=tags, opts=child)
    policy = aws.iam.RolePolicy(f"{name}-policy", role=role.id, policy=pulumi.Output.json_dumps({
        "Version": "2012-10-17", "Statement": statements}), opts=child)
    return role, policy


def execution_role(name: str, settings: SageMakerT4EndpointSettings, image: ImageParts, region: str,
                   account: pulumi.Output[str], prefix: str,
                   token_secret: tuple[aws.secretsmanager.Secret, aws.secretsmanager.SecretVersion] | None,
                   tags: dict[str, str], parent: pulumi.Resource) -> tuple[pulumi.Input[str], list[pulumi.Resource]]:
    """(the role SageMaker runs the model as, what the model waits for): the given executionRoleArn, else a new
    role that may pull the image (its repository and build step: IMAGE), write the endpoint's logs and (with
    hfToken) read the token's secret."""
    log_groups = endpoint_log_groups(prefix)
    if settings.execution_role_arn is not None:
        pulumi.log.info(f"executionRoleArn: the role must allow writing to the log group {log_groups}"
                        + (" and secretsmanager:GetSecretValue on the hfToken secret (output hf_token_secret_arn)"
                           if token_secret else ""), resource=parent)
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
    ], tags, parent, sagemaker_trust(region, account))
    return role.arn, [image.build, role_policy]


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


def step_environment(environment: pulumi.Input[dict[str, str]], region: str,
                     request: pulumi.Output[StepRequest]) -> pulumi.Output[dict[str, str]]:
    """A step's environment: AWS_REGION, the AWS client's settings (which may name another), and its request
    under the variable its type names."""
    return pulumi.Output.all(environment, request).apply(
        lambda found: {"AWS_REGION": region, **found[0], found[1].ENV: found[1].encode()})
