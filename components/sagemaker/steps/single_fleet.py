"""fleetChange single, run by `pulumi up` (a local Command) when a new fleet is about to be created: the stack's
endpoints of another fleet (the stack's tags, scope.py, and a fleet tag that is not this fleet's key) are deleted,
and waited for until SageMaker no longer lists them, before the new endpoint is created. For an account whose
endpoint quota holds one fleet: the price is that nothing serves until the new endpoint is InService (and nothing at
all if it fails), which the component says at preview. Pulumi then deletes the old endpoint's resource at the end of
the `up`: the AWS provider's delete takes an endpoint already gone as deleted (terraform-provider-aws
internal/service/sagemaker/endpoint.go, resourceEndpointDelete: a ValidationException from DeleteEndpoint returns
nil), then its configuration, model and log group.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from botocore.exceptions import BotoCoreError, ClientError

from gemma4_t4.catalog import SAGEMAKER_FLEET_TAG

from ...step import LOCAL_ONLY, StepFailed, StepRequest, run_step, say_as, step_command
from ..scope import StackScope
from .build import session_from_env

MODULE = "gemma4_t4.components.sagemaker.steps.single_fleet"
NAME = "sagemaker-single-fleet"  # its name in components/step.py's STEPS, which the state records
GONE_WAIT_S = 1800  # DeleteEndpoint returns at once; the endpoint is listed as Deleting until its instances go


@dataclass(frozen=True)
class SingleFleetRequest(StepRequest):
    ENV = "GEMMA4_T4_SINGLE_FLEET"

    stack: str
    fleet: str  # this `up`'s fleet key: the endpoint that carries it is kept
    endpoint_name: str  # this fleet's endpoint, kept whatever its tags
    project: str = ""  # the Pulumi project and organization of the stack: with it, what the stack's tags name
    organization: str = ""
    poll_s: float = field(default=15.0, metadata=LOCAL_ONLY)

    @property
    def scope(self) -> StackScope:
        return StackScope(self.stack, self.project, self.organization)


REQUEST_ENV = SingleFleetRequest.ENV
say = say_as("single-fleet")


def command() -> str:
    """The Command's `create`: this step by its NAME (components/step.py: the line every step records)."""
    return step_command(NAME)


def main(env: Mapping[str, str] | None = None) -> int:
    return run_step(SingleFleetRequest, make_room, say, env)


def other_fleets(sagemaker, request: SingleFleetRequest) -> list[str]:
    """The stack's endpoints that run another fleet."""
    found = []
    for page in sagemaker.get_paginator("list_endpoints").paginate():
        for summary in page["Endpoints"]:
            if summary["EndpointName"] == request.endpoint_name:
                continue
            tags = sagemaker.list_tags(ResourceArn=summary["EndpointArn"]).get("Tags", [])
            # Strictly this stack's: an endpoint tagged with a stack's name alone may be another project's.
            if request.scope.owns(tags, strict=True) and \
                    {"Key": SAGEMAKER_FLEET_TAG, "Value": request.fleet} not in tags:
                found.append(summary["EndpointName"])
    return found


def make_room(request: SingleFleetRequest, env: dict[str, str]) -> int:
    """Deletes the stack's endpoints of other fleets and waits until they are gone."""
    try:
        sagemaker = session_from_env(env).client("sagemaker")
        old = other_fleets(sagemaker, request)
        for name in old:
            say(f"fleetChange single: deleting {name} before {request.endpoint_name} is created; no endpoint serves "
                "until the new one is InService")
            sagemaker.delete_endpoint(EndpointName=name)
        deadline = time.monotonic() + GONE_WAIT_S
        while old := [n for n in old if n in {e["EndpointName"] for page in sagemaker.get_paginator(
                "list_endpoints").paginate() for e in page["Endpoints"]}]:
            if time.monotonic() > deadline:
                raise StepFailed(f"{', '.join(old)} still listed {GONE_WAIT_S} s after DeleteEndpoint: the new "
                                 "endpoint was not created; `pulumi up` again once they are gone")
            time.sleep(request.poll_s)
    except (BotoCoreError, ClientError) as err:
        raise StepFailed(f"fleetChange single: the old endpoint could not be deleted ({err}); the new one was not "
                         "created, the old one (if any) still serves") from None
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
