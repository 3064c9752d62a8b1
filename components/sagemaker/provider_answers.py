"""What the AWS provider's getRepository and getRegion answer, word for word, with where each text comes from (how
a failed invoke reaches the program, and the texts every provider shares, pulumi-command's local run among them:
components/provider_answers.py)."""

from __future__ import annotations

import re

from ..provider_answers import END_OF_ANSWER

__all__ = ["GET_REGION", "GET_REPOSITORY", "is_repository_not_found", "repository_access_denied",
           "repository_not_found"]

GET_REPOSITORY = "aws:ecr/getRepository:getRepository"
GET_REGION = "aws:index/getRegion:getRegion"


def repository_not_found(name: str) -> str:
    # source: hashicorp/terraform-provider-aws internal/service/ecr/repository_data_source.go
    # (dataSourceRepositoryRead: `sdkdiag.AppendErrorf(diags, "reading ECR Repository (%s): %s", name, err)`)
    # over findRepositories, which turns RepositoryNotFoundException into a retry.NotFoundError whose
    # Error() is "couldn't find resource" (terraform-plugin-sdk helper/retry/error.go, no Message, no Retries).
    return f"reading ECR Repository ({name}): couldn't find resource"


def repository_access_denied(name: str, account: str, region: str) -> str:
    # source: the same AppendErrorf with the AWS SDK for Go v2's error text: "operation error SERVICE: OP,
    # https response error StatusCode: N, RequestID: ID, ..." (a published transcript of ECR's:
    # turbot/steampipe-plugin-aws#1938), an error code ECR's model does not declare printed by smithy-go's
    # GenericAPIError as "api error CODE: MESSAGE" (aws/smithy-go errors.go), and IAM's message ("User: ARN
    # is not authorized to perform: ACTION on resource: ARN because no identity-based policy allows the
    # ACTION action", AWS IAM User Guide, "Troubleshoot access denied error messages"). The request id is
    # any.
    arn = f"arn:aws:ecr:{region}:{account}:repository/{name}"
    return (f"reading ECR Repository ({name}): operation error ECR: DescribeRepositories, https response error "
            "StatusCode: 400, RequestID: 0f6a2a5e-6f0e-4d5b-9d7e-3a1c2b4d5e6f, api error AccessDeniedException: "
            f"User: arn:aws:iam::{account}:user/deployer is not authorized to perform: ecr:DescribeRepositories "
            f"on resource: {arn} because no identity-based policy allows the ecr:DescribeRepositories action")


def is_repository_not_found(error_text: str, name: str) -> bool:
    answer = rf"reading ECR Repository \({re.escape(name)}\): couldn't find resource"
    pattern = rf"(?m)(?:^|\* |failed: ){answer}{END_OF_ANSWER}"
    return re.search(pattern, error_text) is not None
