"""The endpoint watch (components/sagemaker/steps/endpoint_watch.py) against moto's server on loopback, run as the
stack's Command runs it. An endpoint that fails to reach InService is deleted, its log group given a
retention, its FailureReason printed. Budget: ~10 s."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from aws_standin import ACCOUNT, _backend
from conftest import REPO

from gemma4_t4.components.sagemaker.steps import endpoint_watch

pytestmark = pytest.mark.standin

NAME = "sagemaker-t4-endpoint-1a2b3c4d"
# SageMaker's FailureReason for a container the host image's driver cannot run ([sagemaker-t4-article]).
CANNOT_START = ("CannotStartContainerError. Please ensure the model container for variant AllTraffic starts "
                "correctly when invoked with 'docker run <image> serve'")


@pytest.fixture
def account(moto):
    moto.reset()
    sagemaker = moto.client("sagemaker")
    sagemaker.create_model(ModelName="m", ExecutionRoleArn=f"arn:aws:iam::{ACCOUNT}:role/x",
                           PrimaryContainer={"Image": f"{ACCOUNT}.dkr.ecr.us-east-2.amazonaws.com/r@sha256:0"})
    for config in ("cfg-old", "cfg-new"):
        sagemaker.create_endpoint_config(EndpointConfigName=config, ProductionVariants=[
            {"VariantName": "AllTraffic", "ModelName": "m", "InstanceType": "ml.g4dn.xlarge",
             "InitialInstanceCount": 1}])
    return moto


def watch(moto, **request) -> subprocess.CompletedProcess:
    fields = {"config_name": "cfg-new", "name_prefix": "sagemaker-t4-endpoint-", "appear_s": 0.3, "poll_s": 0.05,
              **request}
    env = {"PATH": os.environ["PATH"], **moto.env(), endpoint_watch.REQUEST_ENV: json.dumps(fields)}
    return subprocess.run([sys.executable, "-m", endpoint_watch.MODULE], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=60)


def endpoint(moto, config: str, status: str, reason: str | None = None) -> None:
    moto.client("sagemaker").create_endpoint(EndpointName=NAME, EndpointConfigName=config)
    made = _backend("sagemaker").endpoints[NAME]
    made.endpoint_status, made.failure_reason = status, reason


def exists(moto) -> bool:
    return any(e["EndpointName"] == NAME for e in moto.client("sagemaker").list_endpoints()["Endpoints"])


def test_the_stack_watches_the_endpoint_made_from_its_configuration(run_stack):
    plan = run_stack("sagemaker-t4")
    watched = plan.one("command:local:Command", "gemma4-t4-endpoint-watch")
    config = plan.one("aws:sagemaker/endpointConfiguration:EndpointConfiguration").state["name"]
    request = json.loads(watched.inputs["environment"][endpoint_watch.REQUEST_ENV])
    assert request == {"config_name": config, "name_prefix": "sagemaker-t4-endpoint-",
                       "fallbacks": ["ml.g4dn.2xlarge", "ml.g4dn.4xlarge", "ml.g4dn.8xlarge", "ml.g4dn.16xlarge"],
                       "log_retention_days": 14}
    four = json.loads(run_stack("sagemaker-t4", "tensorParallelSize=4").one(
        "command:local:Command", "gemma4-t4-endpoint-watch").inputs["environment"][endpoint_watch.REQUEST_ENV])
    assert four["fallbacks"] == [], "no other g4dn carries four T4s"
    assert plan.one("aws:sagemaker/endpoint:Endpoint").state["name"].startswith(request["name_prefix"])
    assert watched.inputs["triggers"] == [config]


def test_a_failed_endpoint_is_deleted_with_its_reason_and_its_logs_kept_14_days(account):
    endpoint(account, "cfg-new", "Failed", CANNOT_START)
    group = f"/aws/sagemaker/Endpoints/{NAME}"
    account.client("logs").create_log_group(logGroupName=group)
    result = watch(account)
    assert result.returncode == 1
    assert f"endpoint {NAME} failed: {CANNOT_START}" in result.stderr
    assert not exists(account) and f"deleted the failed endpoint {NAME}" in result.stderr
    (found,) = account.client("logs").describe_log_groups(logGroupNamePrefix=group)["logGroups"]
    assert found["retentionInDays"] == 14


def test_a_failed_endpoint_without_logs_says_the_container_never_started(account):
    endpoint(account, "cfg-new", "Failed", CANNOT_START)
    result = watch(account)
    assert result.returncode == 1 and not exists(account)
    assert "the container never started" in result.stderr


def test_a_failed_endpoint_whose_group_has_no_stream_says_the_container_never_started(account):
    """The stack makes the log group before the endpoint, so the group is there either way: a container that never
    started wrote no stream into it; one that started (and crashed) did, and the line says where to read it."""
    endpoint(account, "cfg-new", "Failed", CANNOT_START)
    group = f"/aws/sagemaker/Endpoints/{NAME}"
    account.client("logs").create_log_group(logGroupName=group)
    result = watch(account)
    assert result.returncode == 1 and "no log stream in it: the container never started" in result.stderr

    endpoint(account, "cfg-new", "Failed", CANNOT_START)
    # SageMaker's stream per instance: [production-variant-name]/[instance-id] (logging-cloudwatch.html).
    account.client("logs").create_log_stream(logGroupName=group, logStreamName="AllTraffic/i-0123456789abcdef0")
    result = watch(account)
    assert result.returncode == 1 and "never started" not in result.stderr
    assert f"the container's log is in it (aws logs tail {group} --region us-east-2)" in result.stderr


def test_no_capacity_names_the_next_instance_type_with_the_same_t4s(account):
    endpoint(account, "cfg-new", "Failed", "Unable to provision requested ML compute capacity due to "
             "InsufficientInstanceCapacity error.")
    result = watch(account, fallbacks=["ml.g4dn.2xlarge", "ml.g4dn.4xlarge"])
    assert result.returncode == 1 and not exists(account)
    assert "pulumi config set gemma4-t4:instanceType ml.g4dn.2xlarge && pulumi up" in result.stderr


def test_an_endpoint_in_service_is_left_alone(account):
    endpoint(account, "cfg-new", "InService")
    result = watch(account)
    assert result.returncode == 0 and exists(account), result.stderr


def test_an_update_of_the_stacks_endpoint_is_not_watched(account):
    endpoint(account, "cfg-old", "Updating")
    result = watch(account)
    assert result.returncode == 0 and exists(account) and "being updated" in result.stderr


def test_no_endpoint_at_all_is_left_to_the_endpoint_resource(account):
    result = watch(account)
    assert result.returncode == 0 and "CreateEndpoint was refused" in result.stderr
