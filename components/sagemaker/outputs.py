"""What the component's contract outputs say of the endpoint: the target the operator tools reach it by, and the
command that calls it."""

import json
import shlex
from typing import Any

import pulumi
import pulumi_aws as aws

from .scope import StackScope


def contract_target(endpoint: aws.sagemaker.Endpoint, region: str,
                    profile: pulumi.Output[str | None]) -> pulumi.Output[dict[str, Any]]:
    return pulumi.Output.all(endpoint.name, profile).apply(
        lambda found: {"endpoint_name": found[0], "region": region,
                       **({"profile": found[1]} if found[1] else {}),
                       # What marks the stack's endpoints (scope.py): status lists the others it marks.
                       "stack_tags": StackScope.current().tags()})


def connect_command(endpoint: aws.sagemaker.Endpoint, region: str, served_model_name: str) -> pulumi.Output[str]:
    """One chat request to the endpoint through the AWS CLI, its reply on stdout."""
    body = json.dumps({"model": served_model_name, "max_tokens": 64,
                       "messages": [{"role": "user", "content": "Name the four inner planets."}]})
    return endpoint.name.apply(lambda found: shlex.join([
        "aws", "sagemaker-runtime", "invoke-endpoint", "--region", region, "--endpoint-name", found,
        "--content-type", "application/json", "--cli-binary-format", "raw-in-base64-out", "--body", body,
        "/dev/stdout"]))
