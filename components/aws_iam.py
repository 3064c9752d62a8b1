"""An IAM role that one AWS service may assume, with one inline policy: the least-privilege shape
every role here takes (no managed policies)."""

from __future__ import annotations

import json
from typing import Any

import pulumi
import pulumi_aws as aws


def service_role(name: str, service: str, statements: list[dict[str, Any]], tags: dict[str, str],
                 parent: pulumi.Resource) -> tuple[aws.iam.Role, aws.iam.RolePolicy]:
    """Role ``name`` trusted by ``service`` (e.g. "sagemaker.amazonaws.com") and its policy ``name-policy``."""
    child = pulumi.ResourceOptions(parent=parent)
    role = aws.iam.Role(name, assume_role_policy=json.dumps({
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Principal": {"Service": service}, "Action": "sts:AssumeRole"}]}),
        tags=tags, opts=child)
    policy = aws.iam.RolePolicy(f"{name}-policy", role=role.id, policy=pulumi.Output.json_dumps({
        "Version": "2012-10-17", "Statement": statements}), opts=child)
    return role, policy
