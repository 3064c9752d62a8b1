"""What the GCP provider's getDisk answers, word for word, with where each text comes from (how a failed invoke
reaches the program, and the texts every provider shares: components/provider_answers.py)."""

from __future__ import annotations

import re

from ..provider_answers import END_OF_ANSWER

__all__ = ["GET_DISK", "disk_forbidden", "disk_id", "disk_never_attached", "disk_not_found", "is_disk_not_found"]

GET_DISK = "gcp:compute/getDisk:getDisk"


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


def is_disk_not_found(error_text: str, zone: str, name: str) -> bool:
    """Whether a failed getDisk is the provider's "no such disk" (for any project: the provider's default
    project is not known to the program)."""
    disk = rf"projects/[^/\s]+/zones/{re.escape(zone)}/disks/{re.escape(name)}"
    pattern = rf"(?m)(?:^|\* |failed: ){disk} not found{END_OF_ANSWER}"
    return re.search(pattern, error_text) is not None
