"""SageMaker's stand-ins for the offline plan and the program's unit tests: what the AWS provider answers to a
create (its computed outputs, for core.mock_answers.mock_state) and to the functions the component calls
(AwsWorld: what exists in the account before the program runs; getRegion), each answer with its source."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ...components.provider_answers import RUN, engine_failure, run_answer, run_failure
from ...components.sagemaker import provider_answers as answers
from ...core.mock_answers import MOCK_NOW, ProviderInvokeError, physical_name

MOCK_ACCOUNT = "123456789012"


def _physical_name_key(typ: str) -> str:
    """The input that holds a resource's physical name (S3 names buckets by `bucket`)."""
    return "bucket" if typ == "aws:s3/bucket:Bucket" else "name"


# The region the plan's mocks make resources in (core.mock_answers.mock_state's ARNs and URLs).
MOCK_REGION = "us-east-2"


# ARNs shaped as AWS returns them (and the AWS provider passes on), by resource type; {name} is the physical name.
# Sources: IAM User Guide, "IAM identifiers" (reference_identifiers.html: arn:aws:iam::ACCOUNT:role/NAME and
# policy/NAME, no region: IAM is global); SQS's QueueArn (SQS API Reference, GetQueueAttributes:
# arn:aws:sqs:REGION:ACCOUNT:NAME, the provider's `arn`); CloudWatch Logs' log group ARN
# arn:aws:logs:REGION:ACCOUNT:log-group:NAME:* with the provider trimming the ":*" (terraform-provider-aws
# internal/service/logs/group.go, resourceGroupFlatten: trimLogGroupARNWildcardSuffix); S3 bucket ARNs carry
# neither region nor account (S3 User Guide, "Resource types": arn:aws:s3:::BUCKET); SageMaker's lower-cased
# names and its endpoint-config type (SageMaker API Reference, DescribeEndpointConfig's EndpointConfigArn pattern
# arn:aws[a-z-]*:sagemaker:REGION:ACCOUNT:endpoint-config/.*); EventBridge Scheduler's schedule ARN
# arn:aws:scheduler:REGION:ACCOUNT:schedule/GROUP/NAME (Scheduler API Reference, GetSchedule); Secrets Manager adds
# a hyphen and six random characters to the name (Secrets Manager User Guide, "Secret ARN": secret:NAME-a1b2c3);
# an SNS topic's TopicArn is arn:aws:sns:REGION:ACCOUNT:NAME (SNS API Reference, CreateTopic); a CloudWatch alarm's
# AlarmArn arn:aws:cloudwatch:REGION:ACCOUNT:alarm:NAME (CloudWatch API Reference, MetricAlarm).
_ARNS = {
    "aws:iam/role:Role": "arn:aws:iam::{account}:role/{name}",
    "aws:iam/policy:Policy": "arn:aws:iam::{account}:policy/{name}",
    "aws:sqs/queue:Queue": "arn:aws:sqs:{region}:{account}:{name}",
    "aws:cloudwatch/logGroup:LogGroup": "arn:aws:logs:{region}:{account}:log-group:{name}",
    "aws:s3/bucket:Bucket": "arn:aws:s3:::{name}",
    "aws:sagemaker/endpoint:Endpoint": "arn:aws:sagemaker:{region}:{account}:endpoint/{lower}",
    "aws:sagemaker/endpointConfiguration:EndpointConfiguration":
        "arn:aws:sagemaker:{region}:{account}:endpoint-config/{lower}",
    "aws:sagemaker/model:Model": "arn:aws:sagemaker:{region}:{account}:model/{lower}",
    "aws:scheduler/schedule:Schedule": "arn:aws:scheduler:{region}:{account}:schedule/default/{name}",
    "aws:secretsmanager/secret:Secret": "arn:aws:secretsmanager:{region}:{account}:secret:{name}-AbCdEf",
    "aws:sns/topic:Topic": "arn:aws:sns:{region}:{account}:{name}",
    "aws:cloudwatch/metricAlarm:MetricAlarm": "arn:aws:cloudwatch:{region}:{account}:alarm:{name}",
}


def aws_arn(typ: str, physical: str) -> str:
    """The ARN of the resource of type TYP named PHYSICAL, as AWS returns it (_ARNS); another type's, as
    arn:aws:SERVICE:REGION:ACCOUNT:TYPE/NAME (ECR's repository/NAME, CodeBuild's project/NAME)."""
    service, _, kind = typ.split(":", 1)[1].partition("/")
    shape = _ARNS.get(typ, f"arn:aws:{service}:{{region}}:{{account}}:{kind.split(':')[0].lower()}/{{name}}")
    return shape.format(region=MOCK_REGION, account=MOCK_ACCOUNT, name=physical, lower=physical.lower())


def aws_state(typ: str, logical: str, inputs: dict[str, Any], suffix: str) -> tuple[str, dict[str, Any]]:
    """An AWS resource as its provider answers a create: its id (the physical name), ARN, and the URLs the
    components read (an ECR repository's, an SQS queue's)."""
    key = _physical_name_key(typ)
    physical = physical_name(logical, inputs, suffix, key)
    computed: dict[str, Any] = {"arn": aws_arn(typ, physical)}
    if typ == "aws:ecr/repository:Repository":
        computed["repositoryUrl"] = f"{MOCK_ACCOUNT}.dkr.ecr.{MOCK_REGION}.amazonaws.com/{physical}"
    if typ == "aws:sqs/queue:Queue":
        computed["url"] = f"https://sqs.{MOCK_REGION}.amazonaws.com/{MOCK_ACCOUNT}/{physical}"
    return physical, {**computed, **inputs, key: physical}


@dataclass
class AwsWorld:
    """What exists in the AWS account, as the provider's invokes read it. repositories: the ECR repositories by
    name (before the program runs), a set, or a map to each one's tags (a set: app=gemma4-t4 alone, as a release
    before 0.4.0 tagged a kept one); denied: the deploying account may not describe them; endpoints: the SageMaker
    endpoints by name with their CreationTime (YYYY-MM-DDTHH:MM:SSZ), what the component's creation-time step
    reads once its endpoint exists; None: every endpoint it asks about exists, created at
    core.mock_answers.MOCK_NOW (the mocks' clock: the endpoint this `up` creates), so the plan shows a deadline."""

    repositories: set[str] | Mapping[str, Mapping[str, str]] = field(default_factory=set)
    denied: bool = False
    endpoints: Mapping[str, str] | None = None

    def get_repository(self, args: Mapping[str, Any]) -> dict[str, Any]:
        name = args["name"]
        if self.denied:
            # source: answers.repository_access_denied (repository_data_source.go's AppendErrorf over the AWS
            # SDK for Go v2's text), through the bridge and the engine (engine_failure).
            raise ProviderInvokeError(engine_failure(
                answers.GET_REPOSITORY, answers.repository_access_denied(name, MOCK_ACCOUNT, MOCK_REGION)))
        if name not in self.repositories:
            # source: answers.repository_not_found (terraform-provider-aws repository_data_source.go:
            # "reading ECR Repository (%s): %s" over retry.NotFoundError's "couldn't find resource").
            raise ProviderInvokeError(engine_failure(answers.GET_REPOSITORY,
                                                             answers.repository_not_found(name)))
        # source: aws_ecr_repository's data source schema (repository_data_source.go): arn, name, registry_id,
        # repository_url, image_tag_mutability, most_recent_image_tags, tags.
        return {"id": name, "name": name, "registryId": MOCK_ACCOUNT,
                "arn": f"arn:aws:ecr:{MOCK_REGION}:{MOCK_ACCOUNT}:repository/{name}",
                "repositoryUrl": f"{MOCK_ACCOUNT}.dkr.ecr.{MOCK_REGION}.amazonaws.com/{name}",
                "imageTagMutability": "IMMUTABLE", "mostRecentImageTags": [],
                "tags": dict(self.repositories[name]) if isinstance(self.repositories, Mapping)
                else {"app": "gemma4-t4"}}

    def run_local_command(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """pulumi-command's local run (the component runs one command with it: the creation-time step), answered
        with what the step prints for this world."""
        from ...components.sagemaker.steps import created_at

        command = str(args["command"])
        if command != created_at.command():
            raise NotImplementedError(f"{RUN} of {command!r}: the component runs no such command")
        name = created_at.CreatedAtRequest.from_env(args.get("environment") or {}).endpoint_name
        created = MOCK_NOW if self.endpoints is None else self.endpoints.get(name)
        if created is None:
            # source: components/sagemaker/steps/created_at.py (its line for SageMaker's ValidationException
            # 'Could not find endpoint "ARN".', aws/amazon-sagemaker-examples#2402, on stderr as say_as writes it,
            # exit status 1: components/step.py run_step), as pulumi-command's run fails with it (run_failure).
            raise ProviderInvokeError(run_failure(command, 1, f"{created_at.STEP}: {created_at.gone(name)}\n"))
        # source: the step prints DescribeEndpoint's CreationTime alone (SageMaker API reference, DescribeEndpoint:
        # CreationTime, "A timestamp that shows when the endpoint was created"), pulumi-command answers it as
        # run_answer does (runController.go, Run.Invoke).
        return run_answer(dict(args), f"{created}\n", "")


def region_answer(region: str) -> dict[str, Any]:
    # source: terraform-provider-aws internal/service/meta/region_data_source.go: without arguments the data source
    # answers the region the provider is configured with (id, name and region, the last two the same), from the
    # provider's own configuration and without an AWS call.
    return {"id": region, "name": region, "region": region}


def region_unset() -> ProviderInvokeError:
    # source: the AWS provider does not start without a region, and its configure fails with this text (published
    # transcripts: pulumi/pulumi#3570, pulumi/pulumi#8837), through the bridge and the engine
    # (engine_failure).
    return ProviderInvokeError(engine_failure(
        answers.GET_REGION, 'missing required configuration key "aws:region": The region where AWS operations will '
        "take place. Examples are us-east-1, us-west-2, etc.\n    Set a value using the command `pulumi config set "
        "aws:region <value>`."))


def default_provider_region(args: Mapping[str, Any]) -> dict[str, Any]:
    """getRegion of the default AWS provider: the program's aws:region, else AWS_REGION or AWS_DEFAULT_REGION."""
    import pulumi

    region = pulumi.Config("aws").get("region") or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    if not region:
        raise region_unset()
    return region_answer(region)
