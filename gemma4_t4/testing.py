"""Pulumi mocks for the unit tests of a program that uses the components: they answer as the providers do.

    import pulumi
    from gemma4_t4.testing import ProviderMocks

    pulumi.runtime.set_mocks(ProviderMocks(), preview=False)

Pulumi's documented generic mocks (new_resource -> [name + "_id", inputs], call -> {}) leave out what the
providers always answer (an ARN, a repository URL, a disk lookup's "not found"), and the components stop at
the first such answer with one message naming this module. ProviderMocks answers each resource as its
provider does (its physical name, id and the computed outputs the components read: core.plan.mock_state) and
each provider function the components call from what already exists (GceWorld, AwsWorld: a first `pulumi up`
by default), every answer with its source beside it. The offline `gemma4-t4 plan` answers with the same.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pulumi

from .components import provider_answers as answers
from .core.plan import MOCK_ACCOUNT, Invoke, ProviderInvokeError, gcp_project, mock_state

GET_REGION = answers.GET_REGION


# A disk attached now was attached at some time: RFC3339 as the Compute API writes its timestamps.
ATTACHED_AT = "2030-01-01T00:00:00.000-08:00"


@dataclass
class GceWorld:
    """What exists in GCE before the program runs, as the provider's invokes read it.
    disks: name -> {"zone", "sizeGb", "type", "users": [instance self links], "labels", "lastAttachTimestamp"}
    (the last: when a VM last attached it; default: a time if it has users now, else "" for never attached);
    forbidden: the deploying account may not read disks (compute.disks.get)."""

    disks: dict[str, dict[str, Any]] = field(default_factory=dict)
    forbidden: bool = False

    def get_disk(self, args: Mapping[str, Any]) -> dict[str, Any]:
        name, zone = args["name"], str(args.get("zone") or "")
        project = args.get("project") or gcp_project()
        if self.forbidden:
            # source: answers.disk_forbidden (resource_compute_disk.go:1311 -> transport.go:279-280, googleapi's
            # 403 text from hashicorp/packer#12159), through the bridge and the engine (answers.engine_failure).
            raise ProviderInvokeError(answers.engine_failure(answers.GET_DISK,
                                                             answers.disk_forbidden(project, zone, name)))
        disk = self.disks.get(name)
        if disk is None or (zone and disk["zone"] != zone):
            # source: answers.disk_not_found (terraform-provider-google data_source_google_compute_disk.go:58-59
            # at e03b7622: "<id> not found"), through the bridge and the engine (answers.engine_failure).
            raise ProviderInvokeError(answers.engine_failure(answers.GET_DISK,
                                                             answers.disk_not_found(project, zone, name)))
        link = f"https://www.googleapis.com/compute/v1/projects/{project}/zones/{disk['zone']}"
        # source: the data source's schema is google_compute_disk's (data_source_google_compute_disk.go:30,
        # DatasourceSchemaFromResourceSchema): id, name, zone, project, size, type (a self link), users, labels,
        # and the attach timestamps ("" for a disk never attached: see answers.disk_never_attached).
        users = list(disk.get("users", []))
        return {"id": answers.disk_id(project, disk["zone"], name), "name": name,
                "zone": disk["zone"], "project": project, "size": float(disk["sizeGb"]),
                "type": f"{link}/diskTypes/{disk['type']}", "users": users,
                "selfLink": f"{link}/disks/{name}", "labels": disk.get("labels", {}),
                "lastAttachTimestamp": disk.get("lastAttachTimestamp", ATTACHED_AT if users else ""),
                "lastDetachTimestamp": disk.get("lastDetachTimestamp", "")}


# The region the plan's mocks make resources in (core.plan.mock_state's ARNs and URLs).
MOCK_REGION = "us-east-2"


@dataclass
class AwsWorld:
    """What exists in the AWS account before the program runs, as the provider's invokes read it.
    repositories: the ECR repositories by name; denied: the deploying account may not describe them."""

    repositories: set[str] = field(default_factory=set)
    denied: bool = False

    def get_repository(self, args: Mapping[str, Any]) -> dict[str, Any]:
        name = args["name"]
        if self.denied:
            # source: answers.repository_access_denied (repository_data_source.go's AppendErrorf over the AWS
            # SDK for Go v2's text), through the bridge and the engine (answers.engine_failure).
            raise ProviderInvokeError(answers.engine_failure(
                answers.GET_REPOSITORY, answers.repository_access_denied(name, MOCK_ACCOUNT, MOCK_REGION)))
        if name not in self.repositories:
            # source: answers.repository_not_found (terraform-provider-aws repository_data_source.go:
            # "reading ECR Repository (%s): %s" over retry.NotFoundError's "couldn't find resource").
            raise ProviderInvokeError(answers.engine_failure(answers.GET_REPOSITORY,
                                                             answers.repository_not_found(name)))
        # source: aws_ecr_repository's data source schema (repository_data_source.go): arn, name, registry_id,
        # repository_url, image_tag_mutability, most_recent_image_tags, tags.
        return {"id": name, "name": name, "registryId": MOCK_ACCOUNT,
                "arn": f"arn:aws:ecr:{MOCK_REGION}:{MOCK_ACCOUNT}:repository/{name}",
                "repositoryUrl": f"{MOCK_ACCOUNT}.dkr.ecr.{MOCK_REGION}.amazonaws.com/{name}",
                "imageTagMutability": "IMMUTABLE", "mostRecentImageTags": [], "tags": {"app": "gemma4-t4"}}


def _region_answer(region: str) -> dict[str, Any]:
    # source: terraform-provider-aws internal/service/meta/region_data_source.go: without arguments the data source
    # answers the region the provider is configured with (id, name and region, the last two the same), from the
    # provider's own configuration and without an AWS call.
    return {"id": region, "name": region, "region": region}


def _no_region() -> ProviderInvokeError:
    # source: the AWS provider does not start without a region, and its configure fails with this text (published
    # transcripts: pulumi/pulumi#3570, pulumi/pulumi#8837), through the bridge and the engine
    # (answers.engine_failure).
    return ProviderInvokeError(answers.engine_failure(
        GET_REGION, 'missing required configuration key "aws:region": The region where AWS operations will take '
        "place. Examples are us-east-1, us-west-2, etc.\n    Set a value using the command `pulumi config set "
        "aws:region <value>`."))


def default_provider_region(args: Mapping[str, Any]) -> dict[str, Any]:
    """getRegion of the default AWS provider: the program's aws:region, else AWS_REGION or AWS_DEFAULT_REGION."""
    region = pulumi.Config("aws").get("region") or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    if not region:
        raise _no_region()
    return _region_answer(region)


class ProviderMocks(pulumi.runtime.Mocks):
    """Pulumi's mocks, answering as the GCP, AWS and Command providers do. GCE and AWS: what exists before the
    program runs (default: nothing, a first `pulumi up`); INVOKES: more provider functions, by token, each an
    args -> result callable (raise ProviderInvokeError with the provider's text for a failure)."""

    def __init__(self, gce: GceWorld | None = None, aws: AwsWorld | None = None,
                 invokes: Mapping[str, Invoke] | None = None) -> None:
        self.gce = gce or GceWorld()
        self.aws = aws or AwsWorld()
        self.invokes = {**self.mock_invokes(), **(invokes or {})}
        self.providers: dict[str, dict[str, Any]] = {}  # explicit providers' inputs, by resource name

    def mock_invokes(self) -> dict[str, Callable[[dict[str, Any]], dict[str, Any]]]:
        return {answers.GET_DISK: self.gce.get_disk, answers.GET_REPOSITORY: self.aws.get_repository}

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str | None, dict[Any, Any]]:
        inputs = dict(args.inputs)
        if args.typ.startswith("pulumi:providers:"):
            self.providers[args.name] = inputs
        # Auto-naming's suffix: random-looking as Pulumi's, but the same each run.
        suffix = hashlib.sha256(f"{pulumi.get_stack()}|{args.typ}|{args.name}".encode()).hexdigest()[:7]
        return mock_state(args.typ, args.name, inputs, suffix)

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[Any, Any], list[tuple[str, str]] | None]:
        if args.token == GET_REGION and args.token not in self.invokes:
            return _region_answer(self.provider_region(args.provider)), []
        handler = self.invokes.get(args.token)
        # Another function answers empty: the components call none but these.
        return (handler(dict(args.args)) if handler is not None else {}), []

    def provider_region(self, reference: str) -> str:
        """The region of the provider REFERENCE names (URN::ID; empty: the default provider): its region input,
        else (the default provider) the stack's aws:region, else AWS_REGION or AWS_DEFAULT_REGION, where the
        provider reads it (Pulumi's AWS provider configuration page)."""
        urn = reference.rsplit("::", 1)[0] if reference else ""
        name = urn.rsplit("::", 1)[-1] if urn else ""
        explicit = self.providers.get(name) if name and not name.startswith("default") else None
        if explicit is None:
            return str(default_provider_region({})["region"])
        region = explicit.get("region") or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
        if not region:
            raise _no_region()
        return str(region)


__all__ = ["GET_REGION", "AwsWorld", "GceWorld", "ProviderInvokeError", "ProviderMocks", "default_provider_region"]
