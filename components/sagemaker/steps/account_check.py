"""The account check `pulumi up` runs before anything of the SageMaker stack bills: a local Command of
SageMakerT4Endpoint that the build context's upload and the CodeBuild build wait for (preview does not
run it: it may lack credentials).

It asks, with the AWS provider's settings (the same environment as the image build step):
1. CodeBuild may start a build of the project's compute type: the Service Quotas value of
   "Concurrently running builds for Linux/Medium environment", read by name (new accounts often have 0,
   and StartBuild then answers AccountLimitExceededException after the upload).
2. The endpoint quota "<instance type> for endpoint usage" holds the instances the endpoint starts with
   beside those the account's other endpoints hold; when the stack's endpoint already runs, a change holds
   the old and the new fleet at once (blue/green), so both must fit, unless the running endpoint already
   is what this `up` deploys (its fleet tag is this `up`'s fleet key), or fleetChange single deletes the old
   one first. The step runs again whenever the fleet's key changes: the rule that names a new fleet's resources
   (components/sagemaker/fleet.py) re-checks the quota for it, whatever changed.
A refusal exits 1 with the quota's name and how to raise it, which stops `pulumi up` there. Credentials
that may not read the quotas leave the account unchecked (said, not fatal).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass

from botocore.exceptions import BotoCoreError, ClientError

from gemma4_t4.catalog import SAGEMAKER_FLEET_TAG
from gemma4_t4.checks import Check

from ...step import StepRequest, run_step, say_as, step_command
from ..quotas import UPDATE_CHECK, codebuild_check, fetch_codebuild, sagemaker_checks, sagemaker_usage
from ..scope import StackScope
from .build import session_from_env

MODULE = "gemma4_t4.components.sagemaker.steps.account_check"
NAME = "sagemaker-account-check"  # its name in components/step.py's STEPS, which the state records


@dataclass(frozen=True)
class CheckRequest(StepRequest):
    ENV = "GEMMA4_T4_ACCOUNT_CHECK"

    stack: str
    instance_type: str
    instances: int
    most: int  # the most autoscaling may run (= instances without it)
    compute_type: str  # "" with imageBuilder local: no CodeBuild quota to check
    tag: str = ""  # the image tag this `up` deploys
    fleet: str = ""  # the key of this `up`'s fleet (components/sagemaker/fleet.py; the endpoint's fleet tag)
    single: bool = False  # fleetChange single: a new fleet replaces the old one after deleting it
    project: str = ""  # the Pulumi project and organization of the stack: with it, what the stack's tags name
    organization: str = ""

    @property
    def scope(self) -> StackScope:
        return StackScope(self.stack, self.project, self.organization)


def own_endpoint_unchanged(session, request: CheckRequest) -> bool:
    """Whether the stack's running endpoint already is what this `up` deploys: it carries this `up`'s fleet
    digest (a re-run after a failed `up`, or a change that rolls out no fleet). Then no second fleet is made.
    Anything unreadable, or an endpoint without the tag (made before it existed), counts as a change."""
    if not request.fleet:
        return False
    sagemaker = session.client("sagemaker")
    try:
        for page in sagemaker.get_paginator("list_endpoints").paginate():
            for summary in page["Endpoints"]:
                tags = sagemaker.list_tags(ResourceArn=summary["EndpointArn"]).get("Tags", [])
                if request.scope.owns(tags):
                    return {"Key": SAGEMAKER_FLEET_TAG, "Value": request.fleet} in tags
    except (BotoCoreError, ClientError):
        return False
    return False


def account_checks(session, request: CheckRequest) -> list[Check]:
    region = session.region_name
    # No compute type: the image is built on the machine that runs `pulumi up` (imageBuilder local).
    checks = [codebuild_check(region, request.compute_type, fetch_codebuild(session, request.compute_type))
              ] if request.compute_type else []
    quota, in_use, own, untyped = sagemaker_usage(session, request.instance_type, request.scope)
    checks += sagemaker_checks(region, request.instance_type, request.instances, quota, in_use, own,
                               request.most if request.most > request.instances else None, untyped,
                               single=request.single)
    return checks


def stops_the_up(check: Check, unchanged: bool) -> bool:
    """A failed check; and a change to the running endpoint that does not fit both fleets (unless the endpoint
    already is what this `up` deploys)."""
    return not check.ok or (check.warning and check.name == UPDATE_CHECK and not unchanged)


REQUEST_ENV = CheckRequest.ENV
say = say_as("account-check")


def command() -> str:
    """The Command's `create`: this step by its NAME (components/step.py: the line every step records)."""
    return step_command(NAME)


def main(env: Mapping[str, str] | None = None) -> int:
    return run_step(CheckRequest, check, say, env)


def check(request: CheckRequest, env: dict[str, str]) -> int:
    """"ok" (or "unchecked") on stdout; exit 1 when a quota would stop the endpoint or the build."""
    try:
        session = session_from_env(env)
        if not session.region_name:
            say("no AWS region: pulumi config set aws:region us-east-2")
            return 1
        checks = account_checks(session, request)
        unchanged = any(c.name == UPDATE_CHECK for c in checks) and own_endpoint_unchanged(session, request)
    except (BotoCoreError, ClientError) as err:
        # Credentials that may build and deploy but not read Service Quotas: the up goes on unchecked (the
        # build and CreateEndpoint still answer for themselves), and says so.
        say(f"could not ask AWS ({err}): the quotas were not checked; `gemma4-t4 preflight sagemaker-t4` with "
            "credentials that may read Service Quotas and SageMaker endpoints checks them")
        print("unchecked")
        return 0
    stopping = [c for c in checks if stops_the_up(c, unchanged)]
    for check in checks:
        mark = "refused" if check in stopping else ("note" if check.warning else "ok")
        say(f"{mark}: {check.name}: {check.detail}" + (f"; fix: {check.fix}" if check.fix else ""))
    if stopping:
        say("stopped before the image build (nothing uploaded, no build started): "
            + "; ".join(f"{c.name}: {c.fix}" for c in stopping))
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
