"""What to do with an endpoint that carries the stack's tags but is not its endpoint: the lines `status` and
`preflight` print. An `up` stopped during the endpoint's wait (Ctrl-C, a crash) leaves a pending create in the
stack's state and an endpoint that SageMaker goes on creating, which serves once InService: the stack adopts it
with `pulumi refresh --import-pending-creates URN ID` (the Pulumi CLI reference of `pulumi refresh`: "A list of
form [[URN ID]...] describing the provider IDs of pending creates"; an endpoint's ID is its name), so nothing
serving is deleted. Only an endpoint the stack has no pending create for is deleted, with the line that does it."""

from __future__ import annotations

import shlex

from ...components.base import MODULE
from ...components.sagemaker.scope import StackScope, fleet_id
from ...errors import PROJECT

# The stack program's component name (gemma4_t4/program.py's NAME) and its endpoint's logical name: NAME-endpoint,
# then its fleet's id (components/sagemaker/server.py; an endpoint made before 0.4.0 has no fleet in its name).
ENDPOINT_LOGICAL = f"{PROJECT}-endpoint"
ENDPOINT_TYPE = "aws:sagemaker/endpoint:Endpoint"
COMPONENT_TYPE = f"{PROJECT}:{MODULE}:SageMakerT4Endpoint"  # components/base.py's type_token of the component


def endpoint_urn(scope: StackScope, fleet: str = "") -> str:
    """The URN of the stack program's endpoint of FLEET (its fleet tag; "": one made before 0.4.0) in SCOPE's
    stack."""
    logical = f"{ENDPOINT_LOGICAL}-{fleet_id(fleet)}" if fleet else ENDPOINT_LOGICAL
    return f"urn:pulumi:{scope.stack}::{scope.project or PROJECT}::{COMPONENT_TYPE}${ENDPOINT_TYPE}::{logical}"


def adopt_or_delete(name: str, region: str, scope: StackScope, fleet: str = "") -> str:
    """The lines for the stray endpoint NAME of FLEET (its fleet tag): adopt it (an `up` stopped during its
    creation), else delete it."""
    adopt = shlex.join(["pulumi", "refresh", "--stack", scope.stack, "--import-pending-creates",
                        endpoint_urn(scope, fleet), name])
    delete = shlex.join(["aws", "sagemaker", "delete-endpoint", "--endpoint-name", name, "--region", region])
    return (f"left by an `up` stopped during its creation, it serves once InService: adopt it with {adopt}, then "
            f"`pulumi up` (its TTL counts from its creation); if the stack has no pending create for it, delete it: "
            f"{delete}")
