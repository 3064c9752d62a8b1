"""An IAM role that one AWS service may assume, on behalf of this account's resources only, with one inline
policy: the least-privilege shape every role here takes (no managed policies).

Each trust policy carries the conditions the service's own page documents against the cross-service confused
deputy (catalog: SAGEMAKER_TRUST_SOURCE_ARN, CODEBUILD_TRUST_SOURCE_ARN, SCHEDULER_TRUST_SOURCE_ARN, with their
sources), so that another account's resource cannot have the service act as this role."""

from __future__ import annotations

import json
from typing import Any

import pulumi
import pulumi_aws as aws

from gemma4_t4 import catalog


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
