"""The TTL's deadline check, run by `pulumi up` (a local Command) whenever the endpoint's deadline changes:
on the endpoint's first `up` (the deadline lies ahead: nothing to do), and when endpointTtl is changed.
A lowered endpointTtl can move the deadline into the past; whether EventBridge Scheduler ever fires a
one-time schedule set in the past is not documented, so this step deletes the endpoint itself, now, and
says so. An endpoint already gone (the TTL fired) is left gone.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from datetime import UTC, datetime

from botocore.exceptions import BotoCoreError, ClientError

from .codebuild_run import session_from_env

REQUEST_ENV = "GEMMA4_T4_TTL_PASSED"  # JSON: {"endpoint_name": NAME, "deletes_at": "YYYY-MM-DDTHH:MM:SSZ"}
MODULE = "gemma4_t4.components.scripts.ttl_passed"


def say(message: str) -> None:
    print(f"ttl: {message}", file=sys.stderr, flush=True)


def passed(deletes_at: str, now: datetime) -> bool:
    return datetime.fromisoformat(deletes_at.replace("Z", "+00:00")) <= now


def main(env: dict[str, str] | None = None, now: datetime | None = None) -> int:
    env = dict(os.environ if env is None else env)
    try:
        request = json.loads(env[REQUEST_ENV])
        name, deletes_at = request["endpoint_name"], request["deletes_at"]
        due = passed(deletes_at, now or datetime.now(UTC))
    except (KeyError, TypeError, ValueError) as err:
        say(f"{REQUEST_ENV} is missing or malformed ({err}): this step is run by `pulumi up`")
        return 2
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
            + shlex.join(["aws", "sagemaker", "delete-endpoint", "--endpoint-name", name]))
        return 1
    say(f"the endpoint's deadline {deletes_at} has passed (endpointTtl was lowered): deleted {name} now; "
        "`pulumi refresh` records it, `pulumi up` then makes a new one")
    return 0


if __name__ == "__main__":
    sys.exit(main())
