"""SageMaker's and CodeBuild's quotas against what an `up` would run: the account's "<instance type> for endpoint
usage" (the applied value, else AWS's default) against the instances endpoints hold, whether an update of the
stack's running endpoint fits (a changed endpoint holds the old and the new fleet at once), and the CodeBuild build
quota. Read through a boto3 session the caller makes; decisions are pure functions of the API responses, tested on
recorded ones. Below both of their users: the account check `pulumi up` runs (steps/account_check.py) and the
operator's preflight (gemma4_t4/clouds/sagemaker/preflight.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gemma4_t4.catalog import CODEBUILD_BUILD_QUOTAS, CODEBUILD_SERVICE_CODE
from gemma4_t4.checks import Check

from .scope import StackScope


def endpoint_quota_name(instance_type: str) -> str:
    return f"{instance_type} for endpoint usage"


# The check of a change to the stack's running endpoint (both fleets at once, blue/green).
UPDATE_CHECK = "update of this stack's endpoint"
# Endpoints in these states hold no instances.
SAGEMAKER_IDLE_STATUSES = ("Failed",)


@dataclass(frozen=True)
class EndpointQuota:
    name: str
    code: str
    value: float
    applied: bool  # False: no value applied to the account, AWS's default holds


def sagemaker_checks(region: str, instance_type: str, instances: int, quota: EndpointQuota | None,
                     in_use: int, own_fleet: int | None, most: int | None = None,
                     untyped: Sequence[str] = (), single: bool = False) -> list[Check]:
    """quota: the account's "<type> for endpoint usage" (None: SageMaker does not offer the type in
    the region); in_use: instances of the type held by the account's endpoints in the region;
    own_fleet: those held by this stack's endpoint (None: the stack has none yet); instances: what
    the endpoint starts with; most: the most autoscaling may run it at (None: no autoscaling);
    untyped: endpoints whose config is gone, so their instances could not be counted; single: fleetChange
    single (a change deletes the old fleet before it creates the new one), else blue/green (both at once)."""
    name = endpoint_quota_name(instance_type)
    if quota is None:
        return [Check(name, False, f"no such quota in {region}: SageMaker does not offer {instance_type} here",
                      "choose a region that lists it (Service Quotas > Amazon SageMaker)")]
    limit = int(quota.value)
    free = limit - in_use
    source = "applied" if quota.applied else "AWS default; nothing applied to this account"
    detail = f"limit {limit} ({source}), in use {in_use}, free {free} in {region}"
    most = most or instances
    others = in_use - (own_fleet or 0)
    # What a change needs: blue/green holds the old fleet (autoscaled: at its most) and the new one at once.
    change_need = others + instances + (0 if single else most)

    def request(total: int) -> str:
        return (f"request \"{name}\" = {total} in {region} (Service Quotas > Amazon SageMaker, "
                f"quota code {quota.code})")

    if own_fleet is None and free < instances:
        return [Check(name, False, detail, request(change_need) + _why(instances, most, others, single))]
    checks = [Check(name, True, detail + (f"; this stack's endpoint holds {own_fleet}"
                                          if own_fleet is not None else ""))]
    if most > instances:
        checks.append(_scaling_check(instance_type, instances, most, limit, others, request))
    if own_fleet is None:
        if change_need > limit:
            checks.append(Check(LATER_CHECK, True, f"the endpoint fits, but a later change that needs a new fleet "
                                                   f"needs {change_need} {instance_type} and the limit is {limit}",
                                request(change_need) + _why(instances, most, others, single), warning=True))
    else:
        checks.append(_update_check(instance_type, instances, most, limit, others, own_fleet, single, request))
    if untyped:
        checks.append(Check("endpoints of unknown instance type", True,
                            f"{', '.join(untyped)}: serving, but their endpoint config was deleted, so their "
                            f"instances are not counted above; any that are {instance_type} take from the same quota",
                            "aws sagemaker describe-endpoint --endpoint-name NAME shows their instance counts",
                            warning=True))
    return checks


# The check of the changes after the first `up`, for a stack with no endpoint yet.
LATER_CHECK = "later changes of this stack's endpoint"
CHANGE_WINDOW = "~13 minutes"  # a new endpoint's creation, measured ([sagemaker-t4-article]: 13.3 min to InService)


def _why(instances: int, most: int, others: int, single: bool) -> str:
    """Why a request asks for what it asks: what a change that needs a new fleet holds."""
    beside = f"{others} for the account's other endpoints, " if others else ""
    if single:
        return (f" ({beside}{instances} for this endpoint: with fleetChange single a change that needs a new fleet "
                "deletes the old endpoint first, so one fleet at a time, with downtime)")
    return (f" ({beside}{most} for this endpoint and {instances} for the new fleet that every change needing one "
            f"(a new model, maxModelLen, image, instance type or count) creates beside it for {CHANGE_WINDOW} "
            f"(blue/green); or set fleetChange single, which needs {others + instances} but leaves no endpoint "
            "serving during such a change)")


def _scaling_check(instance_type: str, instances: int, most: int, limit: int, others: int, request) -> Check:
    scaling = "autoscaling to maxInstanceCount"
    if limit - others >= most:
        return Check(scaling, True, f"{most} x {instance_type} fit beside the {others} other endpoints "
                                    f"hold ({others + most} of {limit})")
    return Check(scaling, True, f"the endpoint starts, but scales out to {limit - others} of {most}: "
                                f"Application Auto Scaling is refused beyond the quota",
                 request(others + most), warning=True)


def _update_check(instance_type: str, instances: int, most: int, limit: int, others: int, own_fleet: int,
                  single: bool, request) -> Check:
    """Whether a change to the stack's running endpoint fits: blue/green, the old fleet keeps serving (and,
    autoscaled, may grow to its most) until the new one is up; single, the old one is deleted first."""
    if single:
        need = others + instances
        if need <= limit:
            return Check(UPDATE_CHECK, True, f"fleetChange single: a change deletes the old endpoint first, then "
                                             f"holds {instances}: {need} of {limit} fit (no endpoint serves meanwhile)")
        return Check(UPDATE_CHECK, True, f"fleetChange single: a change needs {need} {instance_type} after deleting "
                                         f"the old endpoint, the limit is {limit}, so it would fail",
                     request(need) + _why(instances, most, others, single), warning=True)
    old = max(own_fleet, most) if most > instances else own_fleet
    need = others + old + instances
    if need <= limit:
        return Check(UPDATE_CHECK, True, f"a changed endpoint holds both fleets ({old} + {instances}): "
                                         f"{need} of {limit} fit")
    return Check(UPDATE_CHECK, True, f"a change to the endpoint (any serving or instance setting) holds the "
                                     f"old and the new fleet at once: it needs {need} {instance_type}, the "
                                     f"limit is {limit}, so it would fail; an up that changes nothing else "
                                     "is fine", request(need) + _why(instances, old, others, single), warning=True)


def codebuild_check(region: str, compute_type: str, quota: EndpointQuota | None) -> Check:
    """Whether CodeBuild may run one build of COMPUTE_TYPE: the account's "Concurrently running builds
    for ... environment" (None: Service Quotas lists no such quota in the region)."""
    name = CODEBUILD_BUILD_QUOTAS.get(compute_type, f"Concurrently running builds for {compute_type}")
    console = "Service Quotas > AWS CodeBuild"
    if quota is None:
        return Check(name, False, f"no such quota in {region}: CodeBuild lists no {compute_type} builds here",
                     f"build in a region whose {console} lists it (pulumi config set aws:region us-east-2)")
    source = "applied" if quota.applied else "AWS default; nothing applied to this account"
    detail = f"limit {quota.value:g} ({source}) in {region}"
    if quota.value >= 1:
        return Check(name, True, detail)
    return Check(name, False, detail + ": StartBuild would be refused (\"Cannot have more than 0 builds in queue "
                 "for the account\"), new accounts often start at 0",
                 f"request \"{name}\" = 1 or more in {region} ({console}, quota code {quota.code}): aws "
                 f"service-quotas request-service-quota-increase --region {region} --service-code "
                 f"{CODEBUILD_SERVICE_CODE} --quota-code {quota.code} --desired-value 1; once Service Quotas > "
                 "Quota request history shows it approved, `pulumi up` again (or build on this machine: "
                 "pulumi config set gemma4-t4:imageBuilder local)")


def sagemaker_usage(session: Any, instance_type: str, stack: StackScope
                    ) -> tuple[EndpointQuota | None, int, int | None, list[str]]:
    """fetch_sagemaker's answer, asked through SESSION (AWS errors are the caller's); the stack's own endpoint is the
    one its organization, project and stack tags name (scope.py)."""
    return (_endpoint_quota(session.client("service-quotas"), instance_type),
            *_instances_in_use(session.client("sagemaker"), instance_type, stack))


def fetch_codebuild(session: Any, compute_type: str) -> EndpointQuota | None:
    """The account's CodeBuild quota for builds of COMPUTE_TYPE, read by its name."""
    name = CODEBUILD_BUILD_QUOTAS.get(compute_type, "")
    return quota_by_name(session.client("service-quotas"), CODEBUILD_SERVICE_CODE, name)


def _endpoint_quota(quotas, instance_type: str) -> EndpointQuota | None:
    return quota_by_name(quotas, "sagemaker", endpoint_quota_name(instance_type))


def quota_by_name(quotas, service: str, name: str) -> EndpointQuota | None:
    """ListServiceQuotas leaves out quotas with no value applied to the account, so the quota is
    found among AWS's defaults by name, then its applied value asked for by code."""
    default = next((q for page in quotas.get_paginator("list_aws_default_service_quotas").paginate(
        ServiceCode=service) for q in page["Quotas"] if q["QuotaName"] == name), None)
    if default is None:
        return None
    try:
        applied = quotas.get_service_quota(ServiceCode=service, QuotaCode=default["QuotaCode"])["Quota"]
        return EndpointQuota(name, default["QuotaCode"], float(applied["Value"]), True)
    except quotas.exceptions.NoSuchResourceException:
        return EndpointQuota(name, default["QuotaCode"], float(default["Value"]), False)


def _instances_in_use(sagemaker, instance_type: str, stack: StackScope) -> tuple[int, int | None, list[str]]:
    """(instances of the type held, those of this stack's endpoint or None, the endpoints whose type
    cannot be read: their endpoint config was deleted while they kept serving, which SageMaker allows)."""
    from botocore.exceptions import ClientError

    in_use, own, untyped = 0, None, []
    for page in sagemaker.get_paginator("list_endpoints").paginate():
        for summary in page["Endpoints"]:
            if summary["EndpointStatus"] in SAGEMAKER_IDLE_STATUSES:
                continue
            endpoint = sagemaker.describe_endpoint(EndpointName=summary["EndpointName"])
            try:
                config = sagemaker.describe_endpoint_config(EndpointConfigName=endpoint["EndpointConfigName"])
            except ClientError as err:
                if err.response["Error"]["Code"] != "ValidationException":
                    raise
                untyped.append(summary["EndpointName"])
                continue
            types = {v["VariantName"]: v.get("InstanceType") for v in config["ProductionVariants"]}
            running = {v["VariantName"]: max(v.get("CurrentInstanceCount", 0), v.get("DesiredInstanceCount", 0))
                       for v in endpoint.get("ProductionVariants", [])}
            held = sum(running.get(v["VariantName"], v.get("InitialInstanceCount", 0))
                       for v in config["ProductionVariants"] if types[v["VariantName"]] == instance_type)
            in_use += held
            tags = sagemaker.list_tags(ResourceArn=endpoint["EndpointArn"]).get("Tags", [])
            if stack.owns(tags):
                own = held
    return in_use, own, untyped
