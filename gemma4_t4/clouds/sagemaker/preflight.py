"""SageMaker's preflight: the quotas (components/sagemaker/quotas.py, which the account check `pulumi up` runs
shares) asked as the stack's AWS profile, and endpoints outside the stack's state. Decisions are pure functions of
the API responses, tested on recorded ones; the fetch functions only call boto3.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ...catalog import SAGEMAKER_FLEET_TAG
from ...checks import Check
from ...components.sagemaker.quotas import (
    EndpointQuota,
    fetch_codebuild,
    sagemaker_usage,
)
from ...components.sagemaker.scope import StackScope
from ...core.preflight import Needs, PreflightError
from ...errors import ConfigError, Set
from .failures import cloud_message
from .strays import adopt_or_delete
from .target import aws_session

STRAYS_CHECK = "endpoints outside the stack's state"


@dataclass(frozen=True)
class SageMakerNeeds:
    """SageMaker's part of a stack's Needs: the endpoint's instance type and how many instances it holds."""

    instance_type: str
    instances: int = 1  # what the endpoint starts with
    most: int = 1  # the most autoscaling may run (= instances without it)


def strays_check(region: str, tagged: Sequence[tuple[str, ...]], in_state: str | None,
                 scope: StackScope) -> Check | None:
    """TAGGED: the (name, status[, fleet tag]) of the endpoints that carry the stack's tags (SCOPE's); IN_STATE: the
    one the stack's state holds ("" none, None when the state could not be read). The others were made by an
    `up` stopped during the endpoint's wait (Ctrl-C): they bill outside the state, and the stack's TTL schedule
    deletes them only at its backstop's deadline. The fix adopts each (strays.py), or deletes one the stack
    cannot adopt."""
    strays = [(name, status, *fleet) for name, status, *fleet in tagged if name != in_state]
    if not strays or (in_state is None and len(tagged) < 2):
        return None
    lines = "; ".join(f"{name}: {adopt_or_delete(name, region, scope, *fleet)}" for name, _, *fleet in strays)
    found = ", ".join(f"{name} ({status})" for name, status, *_ in strays)
    detail = (f"{found} carr{'ies' if len(strays) == 1 else 'y'} this stack's tag but "
              + ("not its state" if in_state is not None else
                 "only one endpoint can be the stack's (`pulumi stack output target` names it)")
              + ": left by an `up` stopped during the endpoint's wait, billing")
    return Check(STRAYS_CHECK, True, detail, lines, warning=True)




def fetch_sagemaker(region: str, instance_type: str, stack: StackScope,
                    profile: str | None = None) -> tuple[EndpointQuota | None, int, int | None, list[str]]:
    """(the endpoint quota, instances of the type in use, those of this stack's endpoint or None,
    the endpoints whose instance type cannot be read),
    asked as the stack's aws:profile (the account its resources are made in) or the default chain."""
    from botocore.exceptions import BotoCoreError, ClientError

    session = aws_session(region, profile, PreflightError)
    try:
        return sagemaker_usage(session, instance_type, stack)
    except (BotoCoreError, ClientError) as err:
        raise PreflightError(cloud_message(err) or f"AWS: {err}") from None




def fetch_stack_endpoints(region: str, stack: StackScope, profile: str | None = None
                          ) -> list[tuple[str, str, str]]:
    """(name, status, fleet tag) of the region's endpoints that carry the stack's tags (its organization, project
    and stack)."""
    from botocore.exceptions import BotoCoreError, ClientError

    sagemaker = aws_session(region, profile, PreflightError).client("sagemaker")
    try:
        found = []
        for page in sagemaker.get_paginator("list_endpoints").paginate():
            for summary in page["Endpoints"]:
                tags = {t["Key"]: t["Value"] for t in sagemaker.list_tags(ResourceArn=summary["EndpointArn"])
                        .get("Tags", [])}
                if stack.owns(tags):
                    found.append((summary["EndpointName"], summary["EndpointStatus"],
                                  tags.get(SAGEMAKER_FLEET_TAG, "")))
        return found
    except (BotoCoreError, ClientError) as err:
        raise PreflightError(cloud_message(err) or f"AWS: {err}") from None


def fetch_codebuild_quota(region: str, compute_type: str, profile: str | None = None) -> EndpointQuota | None:
    from botocore.exceptions import BotoCoreError, ClientError

    session = aws_session(region, profile, PreflightError)
    try:
        return fetch_codebuild(session, compute_type)
    except (BotoCoreError, ClientError) as err:
        raise PreflightError(cloud_message(err) or f"AWS: {err}") from None




def aws_profile(config: Mapping[str, Any]) -> str | None:
    """The stack's aws:profile: the Pulumi AWS provider's credentials, so the checks ask the
    account `pulumi up` makes the endpoint in."""
    return str(config["aws:profile"]) if config.get("aws:profile") else None


def aws_region(needs: Needs[Any]) -> str:
    if not needs.region:
        raise ConfigError("aws:region", "is not set: the checks ask the region `pulumi up` deploys to",
                          Set("aws:region", "us-east-2"))
    return needs.region
