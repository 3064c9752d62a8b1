"""The names a GCE stack's VM and data disk carry: fixed, so that the next `pulumi up` after a destroy finds the
retained disk again."""

import pulumi

from ..config.schema import GCE_NAME_MAX, gce_name


def gce_resource_name(prefix: str, suffix: str) -> str:
    """PREFIX-SUFFIX within GCE's 63 characters: the same on every `pulumi up`, so the retained data disk
    is found again after the VM is gone."""
    return f"{prefix[:GCE_NAME_MAX - len(suffix) - 1].rstrip('-')}-{suffix}"


def default_name_prefix(name: str) -> str:
    return gce_name(f"{pulumi.get_stack()}-{name}")
