"""What the providers' lookups answer, word for word, with where each text comes from.

The components look things up through provider invokes (the one path a user's Pulumi mocks can answer),
and an invoke's failure reaches the program as text only. So "absent" is read from the provider's exact
answer for a missing object, and anything else (a permission error, a quota, a network failure) is an
error: never "absent", which would create a second disk or repository over a kept one. The plan's own
mocks (gemma4_t4/clouds/) answer with these same texts, so a test of the component meets the real answer.

How a failed invoke reaches the Python program (every hop cited):
- the provider's data source returns an error; pulumi-terraform-bridge joins its diagnostics with
  go-multierror (pkg/tfshim/sdk-v2/diagnostics.go `errors`, at 59de6c66) into "1 error occurred:\\n\\t* MSG\\n\\n"
  and wraps it as "invoking TOKEN: ..." (pkg/tfbridge/provider.go `Invoke`, `errors.Wrapf(err, "invoking %s",
  tok)`, at 59de6c66);
- the engine wraps that as "invocation of TOKEN returned an error: ..." (pulumi/pulumi
  pkg/resource/deploy/source_eval.go, `resmon.Invoke`);
- the Python SDK raises Exception("invoke of TOKEN failed: " + the gRPC details) (pulumi 3.272.0,
  pulumi/runtime/invoke.py `do_invoke`, with settings.grpc_error_to_exception).
"""

from __future__ import annotations

import re

GET_DISK = "gcp:compute/getDisk:getDisk"
GET_REPOSITORY = "aws:ecr/getRepository:getRepository"
GET_REGION = "aws:index/getRegion:getRegion"


def engine_failure(token: str, message: str) -> str:
    """The details of a failed invoke as the engine hands them to the program (the module's hops 1 and 2)."""
    return f"invocation of {token} returned an error: invoking {token}: 1 error occurred:\n\t* {message}\n\n"


def provider_message(error: BaseException) -> str:
    """The provider's own message out of the engine's and the bridge's wrapping."""
    text = str(error)
    return text.split("\t* ", 1)[1].strip() if "\t* " in text else text.strip()


def disk_id(project: str, zone: str, name: str) -> str:
    return f"projects/{project}/zones/{zone}/disks/{name}"


def disk_not_found(project: str, zone: str, name: str) -> str:
    # source: hashicorp/terraform-provider-google google/services/compute/data_source_google_compute_disk.go
    # lines 44-60 at e03b7622 (2026-08-21): the id is "projects/{{project}}/zones/{{zone}}/disks/{{name}}";
    # resourceComputeDiskRead swallows GCE's 404 (transport.go HandleNotFoundError: d.SetId("")), then
    # `if d.Id() == "" { return fmt.Errorf("%s not found", id) }`.
    return f"{disk_id(project, zone, name)} not found"


# What a found disk says about its past, for "is this the stack's data?" (a disk no VM ever attached holds none):
# the data source's schema is google_compute_disk's (data_source_google_compute_disk.go:30 at e03b7622,
# DatasourceSchemaFromResourceSchema), so getDisk answers `users` (the instances attached now, as v1 self
# links: flattenComputeDiskUsers, resource_compute_disk.go:1949) and `lastAttachTimestamp` /
# `lastDetachTimestamp` (resource_compute_disk.go:915-924, read at :2663-2668 through flatteners that pass the
# API's value on as-is, :1905-1911). The Compute API reference (REST Resource: disks,
# cloud.google.com/compute/docs/reference/rest/v1/disks) has both timestamps as "[Output Only] Last attach
# (detach) timestamp in RFC3339 text format": a disk never attached has none, and the provider's string reads
# "" (pulumi-gcp's GetDiskResult.last_attach_timestamp).


def disk_never_attached(users: list[str], last_attach_timestamp: str | None) -> bool:
    """Whether no VM has ever attached the disk (so it holds nothing a VM wrote)."""
    return not users and not last_attach_timestamp


def disk_forbidden(project: str, zone: str, name: str) -> str:
    # source: resourceComputeDiskRead (resource_compute_disk.go line 1311 at e03b7622) hands any other error
    # to transport.go HandleNotFoundError (lines 279-280): errwrap "Error when reading or editing
    # ComputeDisk %q: {{err}}"; googleapi's Error() is "googleapi: Error CODE: MESSAGE, REASON", and GCE's
    # 403 reads "Required 'compute.X.get' permission for 'RESOURCE', forbidden" (a published transcript:
    # hashicorp/packer#12159, "googleapi: Error 403: Required 'compute.zones.get' permission for
    # 'projects/devops-228813/zones/us-central1-a', forbidden").
    resource = disk_id(project, zone, name)
    return (f'Error when reading or editing ComputeDisk "{resource}": googleapi: Error 403: Required '
            f"'compute.disks.get' permission for '{resource}', forbidden")


# A Pulumi mock (pulumi.runtime.Mocks.call) can fail an invoke only by returning (result, [(property,
# reason)]): the SDK then raises "invoke of TOKEN failed: REASON (PROPERTY)" (pulumi/runtime/invoke.py). A
# mock that raises instead crashes the program. So the provider's message is matched at the end of the text,
# or before that one suffix.
_END = r"(?: \(\w*\))?$"
# What a program's unit tests use instead of mocks that answer otherwise (Pulumi's documented generic ones:
# new_resource -> [name + "_id", inputs], call -> {}): the project's mocks, which answer as the providers do.
USE_PROVIDER_MOCKS = ("under Pulumi's unit-test mocks, use the ones that answer as the providers do: "
                      "pulumi.runtime.set_mocks(gemma4_t4.testing.ProviderMocks(), preview=False)")



def is_disk_not_found(error_text: str, zone: str, name: str) -> bool:
    """Whether a failed getDisk is the provider's "no such disk" (for any project: the provider's default
    project is not known to the program)."""
    pattern = rf"(?m)(?:^|\* |failed: )projects/[^/\s]+/zones/{re.escape(zone)}/disks/{re.escape(name)} not found{_END}"
    return re.search(pattern, error_text) is not None


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
    pattern = rf"(?m)(?:^|\* |failed: )reading ECR Repository \({re.escape(name)}\): couldn't find resource{_END}"
    return re.search(pattern, error_text) is not None
