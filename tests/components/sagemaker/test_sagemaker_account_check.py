"""The account check `pulumi up` runs before the image build (components/sagemaker/steps/account_check.py), against
moto's server on loopback, as the stack's Command runs it: a subprocess with the request the plan hands it.
A new account (CodeBuild's build quota 0, or no endpoint quota) stops there, before the build context is
uploaded and before any build starts. Budget: ~10 s."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from aws_standin import ACCOUNT, add_codebuild_quota, add_sagemaker_quotas, enforce_endpoint_quota
from conftest import REPO

from gemma4_t4 import catalog, clouds
from gemma4_t4.components.sagemaker.scope import StackScope
from gemma4_t4.components.sagemaker.steps import account_check as aws_account_check

pytestmark = pytest.mark.standin

COMMAND = "command:local:Command"
CHECK = "gemma4-t4-account-check"
G4DN = "ml.g4dn.xlarge for endpoint usage"
CODEBUILD = catalog.CODEBUILD_BUILD_QUOTAS["BUILD_GENERAL1_MEDIUM"]


@pytest.fixture
def account(moto):
    moto.reset()
    return moto


def planned_request(run_stack, *overrides: str) -> str:
    return run_stack("sagemaker-t4", *overrides).one(COMMAND, CHECK).inputs["environment"][aws_account_check.REQUEST_ENV]


def check(moto, request: str) -> subprocess.CompletedProcess:
    env = {"PATH": os.environ["PATH"], **moto.env(), aws_account_check.REQUEST_ENV: request}
    return subprocess.run([sys.executable, "-m", aws_account_check.MODULE], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=60)


def stack_endpoint(moto, instances: int, fleet: str | None = None, project: str = "gemma4-t4") -> None:
    """The stack's endpoint as an earlier `up` left it (tagged with the stack and, since the fleet tag exists,
    with the digest of the fleet it runs, as the component tags it)."""
    sagemaker = moto.client("sagemaker")
    sagemaker.create_model(ModelName=f"m-{project}", ExecutionRoleArn=f"arn:aws:iam::{ACCOUNT}:role/x",
                           PrimaryContainer={"Image": f"{ACCOUNT}.dkr.ecr.us-east-2.amazonaws.com/r@sha256:{'0' * 64}"})
    sagemaker.create_endpoint_config(EndpointConfigName=f"c-{project}", ProductionVariants=[
        {"VariantName": "AllTraffic", "ModelName": f"m-{project}", "InstanceType": "ml.g4dn.xlarge",
         "InitialInstanceCount": instances}])
    tags = [{"Key": key, "Value": value} for key, value in StackScope("sagemaker-t4", project, "organization").tags().items()]
    if fleet is not None:
        tags.append({"Key": catalog.SAGEMAKER_FLEET_TAG, "Value": fleet})
    sagemaker.create_endpoint(EndpointName=f"gemma-{project}", EndpointConfigName=f"c-{project}", Tags=tags)


def test_the_upload_and_the_build_wait_for_the_check(run_stack):
    plan = run_stack("sagemaker-t4")
    check_urn = f"{COMMAND}::{CHECK}"
    for type_, name in (("aws:s3/bucketObjectv2:BucketObjectv2", "gemma4-t4-image-context-archive"),
                        (COMMAND, "gemma4-t4-image-codebuild-run")):
        assert check_urn in plan.one(type_, name).options["dependsOn"], name
    request = json.loads(plan.one(COMMAND, CHECK).inputs["environment"][aws_account_check.REQUEST_ENV])
    tag = plan.one(COMMAND, "gemma4-t4-image-codebuild-run").inputs["triggers"][0]
    fleet = plan.one("aws:sagemaker/endpoint:Endpoint").inputs["tags"][catalog.SAGEMAKER_FLEET_TAG]
    assert request == {"stack": "sagemaker-t4", "instance_type": "ml.g4dn.xlarge", "instances": 1, "most": 1,
                       "compute_type": "BUILD_GENERAL1_MEDIUM", "tag": tag, "fleet": fleet, "single": False,
                       "project": "gemma4-t4", "organization": "organization"}
    assert plan.one(COMMAND, CHECK).inputs["triggers"] == [plan.one(COMMAND, CHECK).inputs["environment"][
        aws_account_check.REQUEST_ENV]]


def what_the_fleet_runs(plan) -> dict:
    """The model's and the endpoint configuration's inputs, less the names Pulumi gives them."""
    model = plan.one("aws:sagemaker/model:Model").inputs["primaryContainer"]
    (variant,) = plan.one("aws:sagemaker/endpointConfiguration:EndpointConfiguration").inputs["productionVariants"]
    return {"model": model, "variant": {k: v for k, v in variant.items() if k != "modelName"}}


FLEET_CHANGES = ["maxModelLen=4096", "maxNumSeqs=4", "model=xbill9/gemma-4-E4B-it-qat-q4_0-w4a16-ct-text-emb4",
                 "instanceCount=2", "instanceType=ml.g4dn.2xlarge", "startupHealthCheckTimeoutSeconds=1200",
                 "gpuMemoryUtilization=0.85"]


@pytest.mark.parametrize("change", FLEET_CHANGES)
def test_every_change_that_rolls_out_a_fleet_runs_the_check_again(run_stack, change):
    """The rule that makes a new endpoint (a change to what the model and the configuration are made from) is the
    rule that re-runs the quota check, not a list of fields: a new model, maxModelLen or dtype starts a second
    fleet as surely as a new instance type does."""
    before, after = run_stack("sagemaker-t4"), run_stack("sagemaker-t4", change)
    assert what_the_fleet_runs(after) != what_the_fleet_runs(before), "the change rolls out a new fleet"
    assert after.one(COMMAND, CHECK).inputs["triggers"] != before.one(COMMAND, CHECK).inputs["triggers"]


@pytest.mark.parametrize("change", ["endpointTtl=8h", "maxInstanceCount=0"])
def test_a_change_that_rolls_out_no_fleet_does_not_run_the_check_again(run_stack, change):
    before, after = run_stack("sagemaker-t4"), run_stack("sagemaker-t4", change)
    assert what_the_fleet_runs(after) == what_the_fleet_runs(before)
    assert after.one(COMMAND, CHECK).inputs["triggers"] == before.one(COMMAND, CHECK).inputs["triggers"]


def test_a_token_is_part_of_the_fleet(run_stack):
    """Setting a token gives the model its secret's ARN (HF_TOKEN_SECRET_ARN): a new model, a new fleet, so the
    check runs again. A new value of the token is a new version of the same secret: no new model, no new fleet."""
    config = clouds.stack_config("sagemaker-t4", (), REPO)
    config["gemma4-t4:hfToken"] = {"secure": "AAABAGVuY3J5cHRlZA=="}
    with_token = clouds.offline_plan("sagemaker-t4", config)
    without = run_stack("sagemaker-t4")
    assert with_token.one(COMMAND, CHECK).inputs["triggers"] != without.one(COMMAND, CHECK).inputs["triggers"]


def test_a_new_account_with_no_codebuild_builds_stops_with_the_quota_and_its_fix(account, run_stack, monkeypatch):
    add_codebuild_quota(monkeypatch, default=15.0, applied=0.0)
    add_sagemaker_quotas(monkeypatch, {G4DN: 2.0}, applied={})
    result = check(account, planned_request(run_stack))
    assert result.returncode == 1 and result.stdout == ""
    assert f"refused: {CODEBUILD}: limit 0 (applied) in us-east-2" in result.stderr
    assert ("--service-code codebuild --quota-code L-2DC20C30 --desired-value 1" in result.stderr
            and "stopped before the image build (nothing uploaded, no build started)" in result.stderr)


def test_an_endpoint_quota_of_zero_stops_the_up(account, run_stack, monkeypatch):
    add_codebuild_quota(monkeypatch, default=1.0, applied=None)
    add_sagemaker_quotas(monkeypatch, {G4DN: 0.0}, applied={})
    result = check(account, planned_request(run_stack))
    assert result.returncode == 1
    assert f"ok: {CODEBUILD}: limit 1 (AWS default; nothing applied to this account)" in result.stderr
    # Room for the endpoint and for the new fleet every later change starts beside it (blue/green), and why.
    assert f'refused: {G4DN}: limit 0' in result.stderr and f'request "{G4DN}" = 2 in us-east-2' in result.stderr
    assert "1 for this endpoint and 1 for the new fleet" in result.stderr and "fleetChange single, which needs 1" \
        in result.stderr
    single = check(account, planned_request(run_stack, "fleetChange=single"))
    assert single.returncode == 1 and f'request "{G4DN}" = 1 in us-east-2' in single.stderr
    assert "deletes the old endpoint first" in single.stderr


def test_an_account_with_both_quotas_passes(account, run_stack, monkeypatch):
    add_codebuild_quota(monkeypatch, default=1.0, applied=None)
    add_sagemaker_quotas(monkeypatch, {G4DN: 0.0}, applied={G4DN: 2.0})
    result = check(account, planned_request(run_stack, "instanceCount=2"))
    assert result.returncode == 0 and result.stdout == "ok\n", result.stderr


def test_a_change_to_the_running_endpoint_needs_both_fleets(account, run_stack, monkeypatch):
    """Blue/green: the old fleet serves until the new one is in service, so a change needs 2 x the count."""
    add_codebuild_quota(monkeypatch, default=1.0, applied=None)
    add_sagemaker_quotas(monkeypatch, {G4DN: 0.0}, applied={G4DN: 1.0})
    stack_endpoint(account, 1)
    result = check(account, planned_request(run_stack))
    assert result.returncode == 1
    assert "refused: update of this stack's endpoint" in result.stderr and f'request "{G4DN}" = 2' in result.stderr
    assert "or set fleetChange single, which needs 1" in result.stderr
    # A quota of one fleet, chosen explicitly: the old endpoint is deleted first, so the change fits.
    single = check(account, planned_request(run_stack, "fleetChange=single"))
    assert single.returncode == 0, single.stderr
    assert "fleetChange single: a change deletes the old endpoint first, then holds 1: 1 of 1 fit" in single.stderr


def test_an_up_that_leaves_the_running_endpoint_as_it_is_needs_no_second_fleet(account, run_stack, monkeypatch):
    """The running endpoint already runs this up's fleet (its fleet tag): nothing is rolled out, so a quota that
    holds one fleet is enough (a re-run after a failed `up`)."""
    add_codebuild_quota(monkeypatch, default=1.0, applied=None)
    add_sagemaker_quotas(monkeypatch, {G4DN: 0.0}, applied={G4DN: 1.0})
    request = planned_request(run_stack)
    stack_endpoint(account, 1, fleet=json.loads(request)["fleet"])
    result = check(account, request)
    assert result.returncode == 0 and "note: update of this stack's endpoint" in result.stderr, result.stderr


def test_a_stack_of_the_same_name_in_another_project_is_not_this_stacks_endpoint(account, run_stack, monkeypatch):
    """A colleague's stack sagemaker-t4 of another project holds the quota of 1, running what this `up` deploys
    (the same fleet digest): it is not this stack's endpoint, so this `up` needs a fleet of its own, which does not
    fit. (With the stack's name alone it was taken for this stack's, unchanged, and the `up` went on.)"""
    add_codebuild_quota(monkeypatch, default=1.0, applied=None)
    add_sagemaker_quotas(monkeypatch, {G4DN: 0.0}, applied={G4DN: 1.0})
    request = planned_request(run_stack)
    stack_endpoint(account, 1, fleet=json.loads(request)["fleet"], project="another-project")
    result = check(account, request)
    assert result.returncode == 1, result.stderr
    # Room for the colleague's endpoint, this one, and the fleet every later change starts beside it (blue/green).
    assert "this stack's endpoint holds" not in result.stderr and f'request "{G4DN}" = 3' in result.stderr
    stack_endpoint(account, 1, fleet=json.loads(request)["fleet"])  # and now this stack's own, beside it
    assert "this stack's endpoint holds 1" in check(account, request).stderr


def test_a_new_max_model_len_on_the_same_type_and_count_needs_both_fleets(account, run_stack, monkeypatch):
    """Same instance type, count and image, another maxModelLen: a new model, a new endpoint, two fleets at once."""
    add_codebuild_quota(monkeypatch, default=1.0, applied=None)
    add_sagemaker_quotas(monkeypatch, {G4DN: 0.0}, applied={G4DN: 1.0})
    stack_endpoint(account, 1, fleet=json.loads(planned_request(run_stack))["fleet"])
    result = check(account, planned_request(run_stack, "maxModelLen=4096"))
    assert result.returncode == 1 and "refused: update of this stack's endpoint" in result.stderr, result.stderr


def test_autoscaling_beyond_the_quota_is_a_note_not_a_refusal(account, run_stack, monkeypatch):
    add_codebuild_quota(monkeypatch, default=1.0, applied=None)
    add_sagemaker_quotas(monkeypatch, {G4DN: 0.0}, applied={G4DN: 1.0})
    result = check(account, planned_request(run_stack, "maxInstanceCount=3"))
    assert result.returncode == 0 and "note: autoscaling to maxInstanceCount" in result.stderr, result.stderr


@pytest.mark.parametrize("limit,others,count", [(0, 0, 1), (1, 0, 1), (2, 1, 1), (2, 1, 2), (3, 1, 2)])
def test_the_check_refuses_exactly_what_create_endpoint_would(account, run_stack, monkeypatch, limit, others, count):
    """The check's arithmetic against SageMaker's own answer (ResourceLimitExceeded at CreateEndpoint, a recorded
    stand-in): where CreateEndpoint would refuse after the 13-minute build, the check refuses before it."""
    add_codebuild_quota(monkeypatch, default=1.0, applied=None)
    add_sagemaker_quotas(monkeypatch, {G4DN: 0.0}, applied={G4DN: float(limit)})
    enforce_endpoint_quota(monkeypatch, {"ml.g4dn.xlarge": limit})
    sagemaker = account.client("sagemaker")
    sagemaker.create_model(ModelName="m", ExecutionRoleArn=f"arn:aws:iam::{ACCOUNT}:role/x",
                           PrimaryContainer={"Image": f"{ACCOUNT}.dkr.ecr.us-east-2.amazonaws.com/r@sha256:0"})
    for name, instances in (("other", others), ("ours", count)):
        if instances:
            sagemaker.create_endpoint_config(EndpointConfigName=name, ProductionVariants=[
                {"VariantName": "AllTraffic", "ModelName": "m", "InstanceType": "ml.g4dn.xlarge",
                 "InitialInstanceCount": instances}])
    if others:
        sagemaker.create_endpoint(EndpointName="other", EndpointConfigName="other")
    refused = check(account, planned_request(run_stack, f"instanceCount={count}")).returncode == 1
    try:
        sagemaker.create_endpoint(EndpointName="ours", EndpointConfigName="ours")
        created = True
    except sagemaker.exceptions.ClientError as err:
        assert err.response["Error"]["Code"] == "ResourceLimitExceeded"
        assert f"'{G4DN}' is {limit} Instances, with current utilization of {others}" in err.response["Error"]["Message"]
        created = False
    assert refused == (not created)


def test_credentials_that_may_not_read_quotas_leave_the_up_unchecked_not_stopped(account, run_stack, monkeypatch):
    """IAM's refusal (AccessDeniedException, "User: ARN is not authorized to perform: ACTION", the wording of
    IAM's "Troubleshoot access denied error messages") on Service Quotas: said, and the up goes on."""
    from moto.core.exceptions import JsonRESTError
    from moto.servicequotas.models import ServiceQuotasBackend

    def refused(self, service_code):
        raise JsonRESTError("AccessDeniedException", f"User: arn:aws:iam::{ACCOUNT}:user/deployer is not authorized "
                            "to perform: servicequotas:ListAWSDefaultServiceQuotas")

    monkeypatch.setattr(ServiceQuotasBackend, "list_aws_default_service_quotas", refused)
    result = check(account, planned_request(run_stack))
    assert result.returncode == 0 and result.stdout == "unchecked\n"
    assert "not authorized to perform: servicequotas:ListAWSDefaultServiceQuotas" in result.stderr
    assert "the quotas were not checked" in result.stderr


def test_without_its_request_the_step_says_who_runs_it():
    result = subprocess.run([sys.executable, "-m", aws_account_check.MODULE], cwd=REPO, timeout=60,
                            env={"PATH": os.environ["PATH"]}, capture_output=True, text=True)
    assert result.returncode == 2 and "run by `pulumi up`" in result.stderr


def test_an_endpoint_is_the_stacks_only_when_its_organization_project_and_stack_match():
    ours = StackScope("sagemaker-t4", "gemma4-t4", "acme")
    tags = {catalog.SAGEMAKER_ORGANIZATION_TAG: "acme", catalog.SAGEMAKER_PROJECT_TAG: "gemma4-t4",
            catalog.SAGEMAKER_STACK_TAG: "sagemaker-t4"}
    assert ours.owns(tags) and ours.owns([{"Key": k, "Value": v} for k, v in tags.items()])
    assert not ours.owns({**tags, catalog.SAGEMAKER_PROJECT_TAG: "another-project"})
    assert not ours.owns({**tags, catalog.SAGEMAKER_ORGANIZATION_TAG: "another-org"})
    assert not ours.owns({**tags, catalog.SAGEMAKER_STACK_TAG: "dev"}) and not ours.owns({})
    # Tagged by a release before 0.4.0 (the stack's name alone): the stack's until its first `up` retags it.
    assert ours.owns({catalog.SAGEMAKER_STACK_TAG: "sagemaker-t4"})
    # ... but never for what deletes (fleetChange single): it may be another project's stack of the same name.
    assert not ours.owns({catalog.SAGEMAKER_STACK_TAG: "sagemaker-t4"}, strict=True)
    assert ours.owns(tags, strict=True)
