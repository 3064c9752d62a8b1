"""The fleet rule, in one place: which settings make a new fleet (a new Model, EndpointConfiguration, endpoint and log
group), and the fleet's key, from which both the names of those resources and the account check's trigger are made.

A change to a fleet setting is a new key, so new Pulumi names (`<name>-model-<id>`, `<name>-config-<id>`,
`<name>-endpoint-<id>`, `<name>-endpoint-logs-<id>`): Pulumi creates the new fleet beside the old one and deletes
the old fleet only at the end of an `up` that worked, the endpoint before what it runs on. Nothing the serving
endpoint uses is replaced, so nothing of it is left pending deletion by a failed `up`, which Pulumi would delete
first thing on the next one (pulumi/pulumi#9979); the old fleet is a resource the program no longer declares, and
Pulumi deletes those only when an update succeeds (pulumi/pulumi#14740, "Pulumi by design deletes resources at the
end of an update"). The same key re-runs the account check, so every new fleet is checked against the quota.

Every setting of SageMakerT4EndpointSettings is either a fleet setting or says why it is not (NOT_FLEET): a new
setting must be sorted into one of them (tests/components/sagemaker/test_sagemaker_fleet.py walks them all)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from gemma4_t4 import catalog

from .image import image_tag
from .settings import SageMakerT4EndpointSettings

# What the Model, the EndpointConfiguration or the endpoint's name is made from: the AWS provider replaces a Model or
# an EndpointConfiguration for any change but its tags (terraform-provider-aws internal/service/sagemaker/model.go,
# endpoint_configuration.go: every other argument is ForceNew), and an endpoint for a new name.
FLEET = frozenset({
    # The container's environment (vLLM's arguments, components/sagemaker/container.py) and the model it serves.
    "model", "served_model_name", "dtype", "max_model_len", "gpu_memory_utilization", "max_num_seqs",
    "language_model_only", "model_revision", "tensor_parallel_size",
    # The production variant.
    "instance_type", "instance_count", "inference_ami_version", "startup_health_check_timeout_seconds",
    "model_data_download_timeout_seconds",
    # The image (its tag, and the repository it is pulled from: keepImages moves it to gemma4-t4/<prefix>), the
    # role the model runs as, and where: the endpoint's name starts with the prefix.
    "base_image", "keep_images", "execution_role_arn", "name_prefix", "region",
    # Set or removed: the model's environment names the token's secret (its value is a new secret version, read by
    # instances when they start: no new fleet).
    "hf_token",
})

NOT_FLEET: dict[str, str] = {
    "labels": "tags, updated in place",
    "allow_model_overflow": "a check at preview",
    "allow_unsized_model": "a check at preview",
    "size_from_hub": "how the model is sized at preview",
    "profile": "the credentials of the build step and the operator tools",
    "image_build_environment": "the build step's credentials",
    "min_instance_count": "the autoscaling target, updated in place",
    "max_instance_count": "the autoscaling target, updated in place",
    "scaling_metric": "the autoscaling policy, updated in place",
    "scaling_target": "the autoscaling policy, updated in place",
    "allow_non_t4_instance": "a check at preview (the instance type itself is a fleet setting)",
    "base_image_cuda": "a check at preview (the base image itself is a fleet setting)",
    "image_builder": "who builds the same image under the same tag",
    "fleet_change": "how the next new fleet rolls out",
    "endpoint_ttl": "the delete schedule, updated in place",
    "ttl_alarm_email": "the alarm's e-mail subscription, beside the endpoint",
    "log_retention_days": "the log group's retention, updated in place",
}



def _value(settings: SageMakerT4EndpointSettings, field: str, prefix: str) -> Any:
    value = getattr(settings, field)
    if field == "hf_token":
        return value is not None
    if field == "name_prefix":
        return prefix
    if field == "execution_role_arn" and value is not None and not isinstance(value, str):
        # A role given as a Pulumi Output cannot name resources; its ARN is known only at `up`.
        return "a role given as an Output"
    if field == "base_image":
        return image_tag(catalog.PINS["vllm.sagemaker"], value)
    return value


def fleet_spec(settings: SageMakerT4EndpointSettings, prefix: str,
               container: Mapping[str, str] | None = None) -> dict[str, Any]:
    """What the fleet is made from: the fleet settings (PREFIX: the name prefix the stack resolved) and, as the plan
    resolved them, the container's serving values (CONTAINER: container.container_environment's, known at preview),
    which also follow the catalog (a model's pinned revision, the Hub's spelling of its id) and not settings alone."""
    spec = {field: _value(settings, field, prefix) for field in sorted(FLEET)}
    if container:
        spec["container"] = dict(sorted(container.items()))
    return spec


def fleet_key(settings: SageMakerT4EndpointSettings, prefix: str, container: Mapping[str, str] | None = None) -> str:
    """The fleet's key: the endpoint's fleet tag and the account check's trigger; its start names the resources."""
    return hashlib.sha256(json.dumps(fleet_spec(settings, prefix, container), sort_keys=True, default=str).encode()
                          ).hexdigest()[:16]


