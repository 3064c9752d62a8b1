"""The names a SageMaker stack's resources carry: the stack's prefix, the production variant, and the endpoint's name,
made from its configuration's so that each new fleet is a new endpoint (blue/green by name)."""

import hashlib
import re

import pulumi

from gemma4_t4 import catalog

VARIANT = "AllTraffic"


def default_prefix(name: str) -> str:
    return f"{pulumi.get_stack()}-{name}"


ENDPOINT_SUFFIX = 8  # hex digits from the configuration's name


def endpoint_name_start(prefix: str) -> str:
    """What every endpoint name of the stack starts with: PREFIX-endpoint- (PREFIX made of SageMaker's letters,
    digits and dashes, and cut so that the whole name stays within its 63)."""
    most = catalog.SAGEMAKER_ENDPOINT_NAME_MAX - len("-endpoint-") - ENDPOINT_SUFFIX
    stem = re.sub(r"[^a-zA-Z0-9]+", "-", prefix).strip("-")[:most].rstrip("-")
    return f"{stem}-endpoint-".lstrip("-")


def endpoint_name(prefix: str, config_name: str) -> str:
    """The endpoint's name: PREFIX-endpoint- and 8 hex digits from its configuration's name. Every change that
    needs a new fleet replaces the configuration, so it is a new endpoint beside the old one (blue/green by name),
    and its name is known before CreateEndpoint is called: the log group, the TTL's role and backstop are made
    for it first."""
    return endpoint_name_start(prefix) + hashlib.sha256(config_name.encode()).hexdigest()[:ENDPOINT_SUFFIX]


def endpoint_log_groups(prefix: str) -> str:
    """The log groups of every endpoint endpoint_name may name, as an IAM pattern (? is one character)."""
    return catalog.SAGEMAKER_ENDPOINT_LOG_GROUP.format(endpoint=endpoint_name_start(prefix) + "?" * ENDPOINT_SUFFIX)
