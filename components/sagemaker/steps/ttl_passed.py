"""The TTL's deadline check, run by `pulumi up` (a local Command) whenever the endpoint's deadline changes:
on the endpoint's first `up` (the deadline lies ahead: nothing to do), and when endpointTtl is changed.
A lowered endpointTtl can move the deadline into the past; whether EventBridge Scheduler ever fires a
one-time schedule set in the past is not documented, so this step deletes the endpoint itself, now, and
says so. An endpoint already gone (the TTL fired) is left gone.
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from botocore.exceptions import BotoCoreError, ClientError

from ...step import StepRequest, malformed, run_step, say_as, step_command
from .build import session_from_env

MODULE = "gemma4_t4.components.sagemaker.steps.ttl_passed"
NAME = "sagemaker-ttl-passed"  # its name in components/step.py's STEPS, which the state records


@dataclass(frozen=True)
class TtlRequest(StepRequest):
    ENV = "GEMMA4_T4_TTL_PASSED"

    endpoint_name: str
    deletes_at: str  # YYYY-MM-DDTHH:MM:SSZ


REQUEST_ENV = TtlRequest.ENV
say = say_as("ttl")


def command() -> str:
    """The Command's `create`: this step by its NAME (components/step.py: the line every step records)."""
    return step_command(NAME)


def passed(deletes_at: str, now: datetime) -> bool:
    return datetime.fromisoformat(deletes_at.replace("Z", "+00:00")) <= now


def main(env: Mapping[str, str] | None = None, now: datetime | None = None) -> int:
    return run_step(TtlRequest, lambda request, given: act(request, given, now or datetime.now(UTC)), say, env)


def act(request: TtlRequest, env: dict[str, str], now: datetime) -> int:
    """Deletes the endpoint when its deadline has passed."""
    name, deletes_at = request.endpoint_name, request.deletes_at
    try:
        due = passed(deletes_at, now)
    except (TypeError, ValueError) as err:
        return malformed(say, REQUEST_ENV, err)
    if not due:
        return 0
    try:
        session_from_env(env).client("sagemaker").delete_endpoint(EndpointName=name)
    except ClientError as err:
        # SageMaker's answer for an endpoint that is not there: ValidationException 'Could not find endpoint
        # "ARN".' (a published transcript, aws/amazon-sagemaker-examples#2402).
        if "Could not find endpoint" in err.response["Error"].get("Message", ""):
            say(f"the endpoint's deadline {deletes_at} has passed and {name} is already gone; `pulumi refresh` "
                "records it")
            return 0
        say(f"the endpoint's deadline {deletes_at} has passed (endpointTtl was lowered), but deleting {name} "
            f"failed: {err}; it still bills: " + shlex.join(["aws", "sagemaker", "delete-endpoint", "--endpoint-name",
                                                              name, "--region", session_from_env(env).region_name]))
        return 1
    except BotoCoreError as err:
        say(f"the endpoint's deadline {deletes_at} has passed, but AWS could not be asked ({err}); {name} still "
            "bills until the TTL's backstop schedule deletes it, or: "
            + shlex.join(["aws", "sagemaker", "delete-endpoint", "--endpoint-name", name,
                          *(["--region", env["AWS_REGION"]] if env.get("AWS_REGION") else [])]))
        return 1
    say(f"the endpoint's deadline {deletes_at} has passed (endpointTtl was lowered): deleted {name} now; "
        "`pulumi refresh` records it, `pulumi up` then makes a new one")
    return 0


if __name__ == "__main__":
    sys.exit(main())
