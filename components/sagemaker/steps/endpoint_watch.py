"""The endpoint watch, run by `pulumi up` (a local Command) beside the Endpoint's own creation: it starts
when the endpoint configuration exists, finds the endpoint SageMaker creates from it, and waits.

- InService: exits 0 (the Endpoint resource reports the same).
- Failed: prints SageMaker's FailureReason, gives the endpoint's log group (/aws/sagemaker/Endpoints/NAME: the
  stack's, or one SageMaker created without a retention) the stack's retention, says whether any container wrote
  to it (a log stream; none: the container never started), deletes the endpoint (it holds no instances, but stays
  in the account, and in the way of the next `up`), and exits 1 with the reason.
- An endpoint of this stack being updated to the configuration instead: exits 0. The stack no longer
  updates an endpoint in place (every new configuration is a new endpoint, named after it; see
  components/sagemaker/server.py), so this meets only an update made outside it. No endpoint at all within
  the appear time (CreateEndpoint refused, e.g. ResourceLimitExceeded): exits 0, the Endpoint reports it.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from ...step import LOCAL_ONLY, StepRequest, run_step, say_as, step_command
from .build import session_from_env

MODULE = "gemma4_t4.components.sagemaker.steps.endpoint_watch"
NAME = "sagemaker-endpoint-watch"  # its name in components/step.py's STEPS, which the state records


# SageMaker's FailureReason when the region has no instance of the type to give (as published in
# aws/deep-learning-containers#6673, 2026-08-28: "Unable to provision requested ML compute capacity due to
# InsufficientInstanceCapacity error.").
NO_CAPACITY = "InsufficientInstanceCapacity"


@dataclass(frozen=True)
class WatchRequest(StepRequest):
    ENV = "GEMMA4_T4_ENDPOINT_WATCH"

    config_name: str  # the endpoint configuration the endpoint is created from
    name_prefix: str  # every name of the stack's endpoints starts with it (PREFIX-endpoint-)
    fallbacks: tuple[str, ...] = ()  # other instance types with the same T4s, in the order to try them
    log_retention_days: int = 14  # the stack's logRetentionDays (its own log group has it already)
    appear_s: float = field(default=300, metadata=LOCAL_ONLY)
    timeout_s: float = field(default=7200, metadata=LOCAL_ONLY)
    poll_s: float = field(default=30, metadata=LOCAL_ONLY)

    def __post_init__(self) -> None:
        object.__setattr__(self, "fallbacks", tuple(self.fallbacks))  # a JSON list read back


REQUEST_ENV = WatchRequest.ENV
say = say_as("endpoint-watch")


def command() -> str:
    """The Command's `create`: this step by its NAME (components/step.py: the line every step records)."""
    return step_command(NAME)


def find(sagemaker, request: WatchRequest) -> tuple[dict[str, Any] | None, bool]:
    """(the endpoint made from the configuration, whether an endpoint of ours is being moved to it)."""
    updating = False
    for page in sagemaker.get_paginator("list_endpoints").paginate(NameContains=request.name_prefix):
        for summary in page["Endpoints"]:
            endpoint = sagemaker.describe_endpoint(EndpointName=summary["EndpointName"])
            if endpoint["EndpointConfigName"] == request.config_name:
                return endpoint, False
            if endpoint["EndpointStatus"] == "Updating":
                updating = True
    return None, updating


NEVER_STARTED = "the container never started (compare the image's CUDA with the host image)"


def clean_up(session, endpoint: dict[str, Any], retention_days: int) -> None:
    name = endpoint["EndpointName"]
    logs = session.client("logs")
    group = f"/aws/sagemaker/Endpoints/{name}"
    try:
        logs.put_retention_policy(logGroupName=group, retentionInDays=retention_days)
        # The stack makes the group before the endpoint, so only a stream tells whether a container ever wrote to
        # it: SageMaker writes one per instance, [production-variant-name]/[instance-id] (SageMaker developer guide,
        # "Log groups and streams that SageMaker sends to CloudWatch Logs", logging-cloudwatch.html). A container
        # that never started writes none ([sagemaker-t4-article]: CannotStartContainerError, no log at all).
        streams = logs.describe_log_streams(logGroupName=group, limit=1).get("logStreams", [])
        say(f"log group {group} kept {retention_days} days" + (
            f": the container's log is in it (aws logs tail {group} --region {session.region_name})" if streams
            else f", and no log stream in it: {NEVER_STARTED}"))
    except logs.exceptions.ResourceNotFoundException:
        say(f"no log group {group}: {NEVER_STARTED}")
    session.client("sagemaker").delete_endpoint(EndpointName=name)
    say(f"deleted the failed endpoint {name}; `pulumi up` makes a new one once the reason is fixed")


def watch(session, request: WatchRequest) -> int:
    sagemaker = session.client("sagemaker")
    started = time.monotonic()
    while True:
        endpoint, updating = find(sagemaker, request)
        waited = time.monotonic() - started
        if endpoint is None:
            if updating:
                say("the stack's endpoint is being updated to the new configuration: SageMaker rolls a failed "
                    "update back, nothing to watch")
                return 0
            if waited > request.appear_s:
                say(f"no endpoint from {request.config_name} after {waited:.0f}s: CreateEndpoint was refused (the "
                    "Endpoint resource reports why)")
                return 0
        elif endpoint["EndpointStatus"] == "InService":
            return 0
        elif endpoint["EndpointStatus"] == "Failed":
            reason = endpoint.get("FailureReason") or "(SageMaker gave no FailureReason)"
            say(f"endpoint {endpoint['EndpointName']} failed: {reason}")
            clean_up(session, endpoint, request.log_retention_days)
            if NO_CAPACITY in reason and request.fallbacks:
                say(f"no capacity for this instance type now: try the next with the same T4s: pulumi config set "
                    f"gemma4-t4:instanceType {request.fallbacks[0]} && pulumi up (in order: "
                    f"{', '.join(request.fallbacks)}), or another region: gemma4-t4 preflight sagemaker-t4 "
                    "--all-regions")
            return 1
        if waited > request.timeout_s:
            say(f"endpoint still not in service after {waited:.0f}s")
            return 0
        time.sleep(request.poll_s)


def watched(request: WatchRequest, env: dict[str, str]) -> int:
    try:
        return watch(session_from_env(env), request)
    except (BotoCoreError, ClientError) as err:
        # The watch is a clean-up beside the Endpoint resource, which reports the endpoint's own failure.
        say(f"AWS: {err}: not watched")
        return 0


def main(env: Mapping[str, str] | None = None) -> int:
    return run_step(WatchRequest, watched, say, env)


if __name__ == "__main__":
    sys.exit(main())
