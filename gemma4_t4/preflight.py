"""`gemma4-t4 preflight STACK`: can `pulumi up` work in this account, before it is tried?

GCE: the region's NVIDIA_T4_GPUS and the project's GPUS_ALL_REGIONS quota (limit - usage), and
whether the zone offers the T4 (which zones of the region do). SageMaker: the account's
"<instance type> for endpoint usage" quota against the endpoints already using that type.
The decisions are pure functions of the API responses (as dicts), tested on recorded ones; the
fetch functions only call the clouds' own client libraries.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable


class PreflightError(RuntimeError):
    pass


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""


# --- decisions -----------------------------------------------------------------------------------


def _quota(quotas: Iterable[dict[str, Any]], metric: str) -> dict[str, Any] | None:
    return next((q for q in quotas if q.get("metric") == metric), None)


def _quota_check(name: str, quota: dict[str, Any] | None, needed: int, where: str, fix_where: str) -> Check:
    if quota is None:
        return Check(name, False, f"no {name} quota reported for {where}", f"check IAM & Admin > Quotas for {fix_where}")
    limit, usage = float(quota.get("limit", 0)), float(quota.get("usage", 0))
    free = limit - usage
    detail = f"limit {limit:g}, in use {usage:g}, free {free:g} in {where}"
    if free >= needed:
        return Check(name, True, detail)
    why = " (new projects start at 0)" if limit == 0 else ""
    return Check(name, False, detail + why,
                 f"request a {name} quota of at least {usage + needed:g} for {fix_where} (IAM & Admin > Quotas)")


def gce_checks(region: str, zone: str, accelerator: str, gpus: int, region_doc: dict[str, Any],
               project_doc: dict[str, Any], zones_offering: list[str]) -> list[Check]:
    """region_doc: regions.get; project_doc: projects.get; zones_offering: zones of the region
    that list ``accelerator`` in acceleratorTypes."""
    checks = [
        _quota_check("NVIDIA_T4_GPUS", _quota(region_doc.get("quotas", []), "NVIDIA_T4_GPUS"), gpus,
                     f"region {region}", f"region {region}"),
        _quota_check("GPUS_ALL_REGIONS", _quota(project_doc.get("quotas", []), "GPUS_ALL_REGIONS"), gpus,
                     "the project", "the project (global)"),
    ]
    if zone in zones_offering:
        checks.append(Check(f"{accelerator} in {zone}", True, f"offered (also in: {', '.join(sorted(zones_offering))})"))
    elif zones_offering:
        checks.append(Check(f"{accelerator} in {zone}", False, f"{zone} does not offer {accelerator}",
                            f"pulumi config set gemma4-t4:zone {sorted(zones_offering)[0]} "
                            f"(offered in {', '.join(sorted(zones_offering))})"))
    else:
        checks.append(Check(f"{accelerator} in {zone}", False, f"no zone of {region} offers {accelerator}",
                            "pick another region's zone, e.g. pulumi config set gemma4-t4:zone us-central1-a"))
    return checks


def endpoint_quota_name(instance_type: str) -> str:
    return f"{instance_type} for endpoint usage"


def sagemaker_checks(region: str, instance_type: str, instances: int, quotas: list[dict[str, Any]],
                     in_use: int) -> list[Check]:
    """quotas: service-quotas list_service_quotas(ServiceCode=sagemaker) entries; in_use: instances
    of ``instance_type`` behind this account's endpoints in the region."""
    name = endpoint_quota_name(instance_type)
    quota = next((q for q in quotas if q.get("QuotaName") == name), None)
    if quota is None:
        return [Check(name, False, f"no such quota in {region}: SageMaker does not offer {instance_type} here",
                      "choose a region that lists it (Service Quotas > Amazon SageMaker)")]
    value = int(quota.get("Value", 0))
    free = value - in_use
    detail = f"limit {value}, in use {in_use}, free {free} in {region}"
    if free >= instances:
        return [Check(name, True, detail)]
    return [Check(name, False, detail, f"request \"{name}\" = {in_use + instances} in {region} "
                  f"(Service Quotas > Amazon SageMaker{', quota code ' + quota['QuotaCode'] if 'QuotaCode' in quota else ''})")]


def format_checks(checks: list[Check]) -> str:
    width = max(len(c.name) for c in checks)
    lines = []
    for c in checks:
        lines.append(f"{'OK  ' if c.ok else 'FAIL'}  {c.name:<{width}}  {c.detail}")
        if c.fix:
            lines.append(f"      {'':<{width}}  fix: {c.fix}")
    return "\n".join(lines)


# --- fetching (the clouds' own client libraries) -------------------------------------------------------


def fetch_gce(project: str, region: str, accelerator: str) -> tuple[dict, dict, list[str]]:
    try:
        from google.api_core import exceptions as gexc
        from google.auth import exceptions as auth_exc
        from google.cloud import compute_v1
    except ImportError:
        raise PreflightError("google-cloud-compute is not installed: pip install google-cloud-compute") from None
    try:
        region_msg = compute_v1.RegionsClient().get(project=project, region=region)
        project_msg = compute_v1.ProjectsClient().get(project=project)
        zones = [z.rsplit("/", 1)[-1] for z in region_msg.zones]
        offering = []
        for zone in zones:
            listed = compute_v1.AcceleratorTypesClient().list(project=project, zone=zone)
            if any(a.name == accelerator for a in listed):
                offering.append(zone)
    except auth_exc.DefaultCredentialsError:
        raise PreflightError("no Google credentials: gcloud auth application-default login") from None
    except gexc.GoogleAPICallError as err:
        raise PreflightError(f"Compute Engine API: {err.message}") from None
    return (type(region_msg).to_dict(region_msg), type(project_msg).to_dict(project_msg), offering)


def fetch_sagemaker(region: str, instance_type: str) -> tuple[list[dict], int]:
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError

    session = boto3.session.Session(region_name=region)
    if session.get_credentials() is None:
        raise PreflightError("no AWS credentials: run `aws configure` or `aws sso login`, or set AWS_PROFILE")
    try:
        quotas = [q for page in session.client("service-quotas").get_paginator("list_service_quotas")
                  .paginate(ServiceCode="sagemaker") for q in page["Quotas"]]
        sagemaker = session.client("sagemaker")
        in_use = 0
        for page in sagemaker.get_paginator("list_endpoints").paginate():
            for summary in page["Endpoints"]:
                endpoint = sagemaker.describe_endpoint(EndpointName=summary["EndpointName"])
                config = sagemaker.describe_endpoint_config(EndpointConfigName=endpoint["EndpointConfigName"])
                in_use += sum(v.get("InitialInstanceCount", 0) for v in config["ProductionVariants"]
                              if v.get("InstanceType") == instance_type)
    except (BotoCoreError, ClientError) as err:
        raise PreflightError(f"AWS: {err}") from None
    return quotas, in_use


def run(stack: str, config: dict[str, Any], project: str | None = None) -> list[Check]:
    """The checks for STACK, with its config as the plan assembles it."""
    def key(name: str) -> Any:
        return config[f"gemma4-t4:{name}"]

    if key("cloud") == "gce":
        project = project or config.get("gcp:project")
        if not project:
            raise PreflightError("no GCP project: pulumi config set gcp:project PROJECT (or --project)")
        zone = key("zone")
        region = zone.rsplit("-", 1)[0]
        region_doc, project_doc, offering = fetch_gce(project, region, key("gpuType"))
        return gce_checks(region, zone, key("gpuType"), int(key("gpuCount")), region_doc, project_doc, offering)
    region = config.get("aws:region")
    quotas, in_use = fetch_sagemaker(region, key("instanceType"))
    return sagemaker_checks(region, key("instanceType"), int(key("instanceCount")), quotas, in_use)
