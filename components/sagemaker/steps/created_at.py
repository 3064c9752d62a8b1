"""The endpoint's creation time, the TTL's clock: run by every `pulumi up` and `pulumi preview` once the endpoint
exists (pulumi-command's local run invoke, which runs its command each time the program runs), it prints the
endpoint's CreationTime as SageMaker records it, YYYY-MM-DDTHH:MM:SSZ (UTC), and nothing else on stdout.

Each endpoint has its own CreationTime, so the deadline follows the endpoint, not the state: a new endpoint under
the same name (after the TTL deleted the old one, `pulumi refresh`, `pulumi up`) gets a new deadline, and an
endpoint adopted after a Ctrl-C (`pulumi refresh --import-pending-creates`) gets the one its creation gave it.

An endpoint the state still lists but SageMaker no longer has (its TTL deleted it, or someone did) fails the step,
and the `up` with it, with the line that says to refresh.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC

from botocore.exceptions import BotoCoreError, ClientError

from ...step import StepFailed, StepRequest, run_step, say_as, step_command
from .build import session_from_env

MODULE = "gemma4_t4.components.sagemaker.steps.created_at"
NAME = "sagemaker-created-at"  # its name in components/step.py's STEPS, which the state records
STEP = "created-at"
TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"


@dataclass(frozen=True)
class CreatedAtRequest(StepRequest):
    ENV = "GEMMA4_T4_CREATED_AT"

    endpoint_name: str


REQUEST_ENV = CreatedAtRequest.ENV
say = say_as(STEP)


def command() -> str:
    """The invoke's command: this step by its NAME (components/step.py: the line every step records)."""
    return step_command(NAME)


def gone(name: str) -> str:
    """The step's one line for an endpoint SageMaker does not have."""
    return (f"the endpoint {name} no longer exists (its TTL deleted it, or someone did): `pulumi up --refresh` (or "
            "`pulumi refresh`, then `pulumi up`) records that and makes a new endpoint with a new deadline")


def creation_time(request: CreatedAtRequest, env: dict[str, str]) -> int:
    name = request.endpoint_name
    try:
        endpoint = session_from_env(env).client("sagemaker").describe_endpoint(EndpointName=name)
    except ClientError as err:
        error = err.response.get("Error", {})
        # SageMaker's answer for an endpoint that is not there: ValidationException 'Could not find endpoint
        # "ARN".' (a published transcript, aws/amazon-sagemaker-examples#2402).
        if error.get("Code") == "ValidationException" and "Could not find endpoint" in error.get("Message", ""):
            raise StepFailed(gone(name)) from None
        raise StepFailed(f"SageMaker did not describe the endpoint {name}: {err}; its creation time, from which its "
                         "TTL counts, is unknown") from None
    except BotoCoreError as err:
        raise StepFailed(f"AWS could not be asked for the endpoint {name}'s creation time, from which its TTL "
                         f"counts: {err}") from None
    print(endpoint["CreationTime"].astimezone(UTC).strftime(TIME_FORMAT), flush=True)
    return 0


def main(env: Mapping[str, str] | None = None) -> int:
    return run_step(CreatedAtRequest, creation_time, say, env)


if __name__ == "__main__":
    sys.exit(main())
