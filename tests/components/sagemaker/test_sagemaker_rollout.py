"""A change to a running SageMaker endpoint, and an `up` that stops midway, against the plan and moto's server on
loopback: every change that needs a new fleet makes a new endpoint (blue/green by name), never an in-place
UpdateEndpoint that SageMaker may roll back unseen; the TTL's backstop schedule exists before CreateEndpoint is
called, so an `up` killed during the endpoint's wait leaves a schedule that deletes it; `status` and `preflight`
name what carries the stack's tag outside its state; a lowered TTL whose deadline has passed deletes the endpoint
now; `status` reads the dead-letter queue only for the current endpoint. Budget: ~40 s."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from datetime import UTC, datetime, timedelta

import pytest
from aws_standin import ACCOUNT, _backend, fire_schedule, set_endpoint_status
from conftest import REPO

from gemma4_t4 import catalog, clouds
from gemma4_t4.clouds.sagemaker import preflight
from gemma4_t4.components.sagemaker import names, ttl
from gemma4_t4.components.sagemaker.scope import StackScope
from gemma4_t4.components.sagemaker.steps import endpoint_watch, ttl_passed
from gemma4_t4.core.mock_answers import MOCK_NOW

pytestmark = pytest.mark.standin

ENDPOINT = "aws:sagemaker/endpoint:Endpoint"
CONFIG = "aws:sagemaker/endpointConfiguration:EndpointConfiguration"
SCHEDULE = "aws:scheduler/schedule:Schedule"
COMMAND = "command:local:Command"
# The stack the tests' endpoints belong to, as preflight names it without the Pulumi CLI (its organization unknown).
SCOPE = StackScope("sagemaker-t4", "gemma4-t4")
# SageMaker's FailureReason for a container the host image's driver cannot run ([sagemaker-t4-article]).
CANNOT_START = ("CannotStartContainerError. Please ensure the model container for variant AllTraffic starts "
                "correctly when invoked with 'docker run <image> serve'")


def urn(plan, type_: str, name: str) -> str:
    """A dependency as the plan records it (TYPE::NAME)."""
    plan.one(type_, name)
    return f"{type_}::{name}"


# --- blue/green by name -------------------------------------------------------------------------------------


@pytest.mark.parametrize("overrides", [(), ("maxInstanceCount=2",)])
def test_the_endpoint_is_named_after_its_configuration_and_replaced_not_updated(run_stack, overrides):
    """Autoscaled or not: a new configuration (every change to what the fleet runs) is a new endpoint name, which
    the provider can only meet with a replacement, made before the old endpoint is deleted."""
    plan = run_stack("sagemaker-t4", *overrides)
    endpoint, config = plan.one(ENDPOINT), plan.one(CONFIG).state["name"]
    assert endpoint.inputs["name"] == names.endpoint_name("sagemaker-t4", config)
    assert names.endpoint_name("sagemaker-t4", f"{config}x") != endpoint.inputs["name"], "a new one, a new name"
    assert endpoint.options["replaceOnChanges"] == ["endpointConfigName"]
    assert endpoint.options["deleteBeforeReplace"] is False, "the old endpoint serves until the new one is up"
    assert endpoint.inputs["endpointConfigName"] == config


def test_a_long_name_prefix_still_gives_a_valid_endpoint_name():
    name = names.endpoint_name("x" * 80, "x" * 80 + "-config-1a2b3c4")
    assert len(name) == catalog.SAGEMAKER_ENDPOINT_NAME_MAX and re.fullmatch(r"x+-endpoint-[0-9a-f]{8}", name)


@pytest.fixture
def fleets(moto):
    """The account after a first `up`: the old endpoint serving its configuration and model."""
    moto.reset()
    sagemaker = moto.client("sagemaker")
    for suffix in ("old", "new", "fixed"):
        sagemaker.create_model(ModelName=f"m-{suffix}", ExecutionRoleArn=f"arn:aws:iam::{ACCOUNT}:role/x",
                               PrimaryContainer={"Image": f"{ACCOUNT}.dkr.ecr.us-east-2.amazonaws.com/r@sha256:0"})
        sagemaker.create_endpoint_config(EndpointConfigName=f"gemma4-t4-config-{suffix}", ProductionVariants=[
            {"VariantName": "AllTraffic", "ModelName": f"m-{suffix}", "InstanceType": "ml.g4dn.xlarge",
             "InitialInstanceCount": 1}])
    sagemaker.create_endpoint(EndpointName=names.endpoint_name("sagemaker-t4", "gemma4-t4-config-old"),
                              EndpointConfigName="gemma4-t4-config-old")
    return moto


def watch(moto, config_name: str) -> subprocess.CompletedProcess:
    fields = {"config_name": config_name, "name_prefix": names.endpoint_name_start("sagemaker-t4"), "appear_s": 0.3, "poll_s": 0.05}
    env = {"PATH": os.environ["PATH"], **moto.env(), endpoint_watch.REQUEST_ENV: json.dumps(fields)}
    return subprocess.run([sys.executable, "-m", endpoint_watch.MODULE], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=60)


def test_a_new_fleet_that_fails_fails_the_up_and_the_old_endpoint_keeps_serving(fleets):
    """The change's new endpoint fails as SageMaker reports it (DescribeEndpoint: EndpointStatus Failed with a
    FailureReason; SageMaker API Reference, DescribeEndpoint): the watch fails the `up` with the reason and
    deletes the failed endpoint, while the old endpoint, its configuration and its model are untouched and
    InService. The next `up` (the reason fixed: a new configuration) makes a third endpoint that comes up."""
    sagemaker = fleets.client("sagemaker")
    old = names.endpoint_name("sagemaker-t4", "gemma4-t4-config-old")
    new = names.endpoint_name("sagemaker-t4", "gemma4-t4-config-new")
    assert new != old, "the new fleet is a new endpoint beside the old one"
    sagemaker.create_endpoint(EndpointName=new, EndpointConfigName="gemma4-t4-config-new")
    set_endpoint_status(new, "Failed")
    _backend("sagemaker").endpoints[new].failure_reason = CANNOT_START

    failed = watch(fleets, "gemma4-t4-config-new")
    assert failed.returncode == 1 and f"endpoint {new} failed: {CANNOT_START}" in failed.stderr
    described = sagemaker.describe_endpoint(EndpointName=old)
    assert (described["EndpointStatus"], described["EndpointConfigName"]) == ("InService", "gemma4-t4-config-old")
    assert sagemaker.describe_endpoint_config(EndpointConfigName="gemma4-t4-config-old")["ProductionVariants"]
    assert sagemaker.describe_model(ModelName="m-old")["ModelName"] == "m-old"
    assert [e["EndpointName"] for e in sagemaker.list_endpoints()["Endpoints"]] == [old]

    fixed = names.endpoint_name("sagemaker-t4", "gemma4-t4-config-fixed")
    sagemaker.create_endpoint(EndpointName=fixed, EndpointConfigName="gemma4-t4-config-fixed")
    assert watch(fleets, "gemma4-t4-config-fixed").returncode == 0
    # Only then does Pulumi delete the replaced endpoint (then its configuration and model).
    sagemaker.delete_endpoint(EndpointName=old)
    assert sagemaker.describe_endpoint(EndpointName=fixed)["EndpointStatus"] == "InService"


# --- a TTL before CreateEndpoint -----------------------------------------------------------------------------


def test_the_backstop_exists_before_create_endpoint_and_needs_nothing_of_the_endpoint(run_stack):
    plan = run_stack("sagemaker-t4", "endpointTtl=8h")
    endpoint = plan.one(ENDPOINT)
    backstop, first = plan.one(SCHEDULE, "gemma4-t4-ttl-backstop"), plan.one(SCHEDULE, "gemma4-t4-ttl")
    assert urn(plan, SCHEDULE, "gemma4-t4-ttl-backstop") in endpoint.options["dependsOn"]
    # Everything the backstop reads is known before the endpoint exists: its name (from the configuration's),
    # the role, the queue, and the clock read just before the create.
    assert json.loads(backstop.inputs["target"]["input"]) == {"EndpointName": endpoint.inputs["name"]}
    # The same delete (its own dead-letter queue aside: its harmless failure alarms nobody).
    assert {**backstop.inputs["target"], "deadLetterConfig": None} == {**first.inputs["target"], "deadLetterConfig": None}
    requested = plan.one(COMMAND, "gemma4-t4-endpoint-requested-at")
    assert requested.inputs["triggers"] == [endpoint.inputs["name"]]
    assert urn(plan, CONFIG, plan.one(CONFIG).name) in requested.options["dependsOn"]
    at = datetime.fromisoformat(MOCK_NOW.replace("Z", "+00:00"))
    latest_in_service = at + timedelta(seconds=catalog.SAGEMAKER_ENDPOINT_CREATE_TIMEOUT_S)
    assert backstop.inputs["scheduleExpression"] == f"at({(latest_in_service + timedelta(hours=9)):%Y-%m-%dT%H:%M:%S})"
    # The tight schedule is made once the endpoint exists: its deadline is the endpoint's CreationTime plus the TTL.
    assert urn(plan, ENDPOINT, endpoint.name) in plan.one(COMMAND, "gemma4-t4-ttl-passed").options[
        "dependsOn"]
    assert urn(plan, COMMAND, "gemma4-t4-ttl-passed") in first.options["dependsOn"]
    policy = json.loads(plan.one("aws:iam/rolePolicy:RolePolicy", "gemma4-t4-ttl-policy").inputs["policy"])
    assert {"Effect": "Allow", "Action": "sagemaker:DeleteEndpoint",
            "Resource": f"arn:aws:sagemaker:us-east-2:123456789012:endpoint/{endpoint.inputs['name']}"} in policy["Statement"]
    # The first schedule and its own right to delete follow the endpoint resource: during a change they still
    # name the old endpoint until the new one is created, so a new fleet that fails leaves the old one its TTL.
    in_service = json.loads(plan.one("aws:iam/rolePolicy:RolePolicy", "gemma4-t4-ttl-in-service-policy").inputs[
        "policy"])
    assert in_service["Statement"] == [{"Effect": "Allow", "Action": "sagemaker:DeleteEndpoint",
                                        "Resource": endpoint.state["arn"]}]
    assert urn(plan, "aws:iam/rolePolicy:RolePolicy", "gemma4-t4-ttl-in-service-policy") in first.options["dependsOn"]


# What `pulumi up` does from the backstop on, in the plan's order, as a process: the backstop schedule, then
# CreateEndpoint, then the provider's wait for InService (terraform-provider-aws waitEndpointInService polls
# DescribeEndpoint); only after it would the state record the endpoint and the tight schedule be made.
UP_FROM_THE_BACKSTOP = textwrap.dedent("""
    import json, os, sys, time
    import boto3
    plan = json.loads(os.environ["PLANNED"])
    session = boto3.session.Session(region_name=os.environ["AWS_REGION"])
    scheduler, sagemaker = session.client("scheduler"), session.client("sagemaker")
    scheduler.create_schedule(**plan["backstop"])
    sagemaker.create_endpoint(EndpointName=plan["endpoint"], EndpointConfigName="c", Tags=plan["tags"])
    print("waiting", flush=True)
    while sagemaker.describe_endpoint(EndpointName=plan["endpoint"])["EndpointStatus"] != "InService":
        time.sleep(0.1)
    print("in service", flush=True)
""")


def test_an_up_killed_during_the_endpoint_wait_leaves_a_schedule_that_deletes_the_endpoint(moto, run_stack,
                                                                                           monkeypatch):
    from moto.sagemaker.models import FakeEndpoint

    moto.reset()
    original = FakeEndpoint.__init__

    def creating(self, *args, **kwargs):
        original(self, *args, **kwargs)
        self.endpoint_status = "Creating"  # DescribeEndpoint right after CreateEndpoint (API Reference)

    monkeypatch.setattr(FakeEndpoint, "__init__", creating)
    plan = run_stack("sagemaker-t4", "endpointTtl=8h")
    name = plan.one(ENDPOINT).inputs["name"]
    sagemaker, iam, sqs = moto.client("sagemaker"), moto.client("iam"), moto.client("sqs")
    sagemaker.create_model(ModelName="m", ExecutionRoleArn=f"arn:aws:iam::{ACCOUNT}:role/x",
                           PrimaryContainer={"Image": f"{ACCOUNT}.dkr.ecr.us-east-2.amazonaws.com/r@sha256:0"})
    sagemaker.create_endpoint_config(EndpointConfigName="c", ProductionVariants=[
        {"VariantName": "AllTraffic", "ModelName": "m", "InstanceType": "ml.g4dn.xlarge", "InitialInstanceCount": 1}])
    queue_url = sqs.create_queue(QueueName="gemma4-t4-ttl-backstop-dlq")["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    role = plan.find("aws:iam/role:Role", "gemma4-t4-ttl")[0].inputs
    role_arn = iam.create_role(RoleName="gemma4-t4-ttl", AssumeRolePolicyDocument=role["assumeRolePolicy"])[
        "Role"]["Arn"]
    policy = plan.one("aws:iam/rolePolicy:RolePolicy", "gemma4-t4-ttl-policy").inputs["policy"]
    iam.put_role_policy(RoleName="gemma4-t4-ttl", PolicyName="p",
                        PolicyDocument=policy.replace(plan.one("aws:sqs/queue:Queue", "gemma4-t4-ttl-backstop-dlq").state["arn"], queue_arn))
    backstop = plan.one(SCHEDULE, "gemma4-t4-ttl-backstop").inputs
    target = backstop["target"]
    planned = {"endpoint": name, "tags": [{"Key": k, "Value": v} for k, v in plan.one(ENDPOINT).inputs["tags"].items()],
               "backstop": {"Name": "gemma4-t4-ttl-backstop", "ScheduleExpression": backstop["scheduleExpression"],
                            "ScheduleExpressionTimezone": "UTC", "FlexibleTimeWindow": {"Mode": "OFF"},
                            "Target": {"Arn": target["arn"], "RoleArn": role_arn, "Input": target["input"],
                                       "DeadLetterConfig": {"Arn": queue_arn},
                                       "RetryPolicy": {"MaximumRetryAttempts": 185,
                                                       "MaximumEventAgeInSeconds": 86400}}}}
    up = subprocess.Popen([sys.executable, "-c", UP_FROM_THE_BACKSTOP], cwd=REPO, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True,
                          env={"PATH": os.environ["PATH"], **moto.env(), "PLANNED": json.dumps(planned)})
    line = up.stdout.readline()
    if line != "waiting\n":
        up.kill()
        pytest.fail(f"the up did not reach the wait: {line!r} {up.communicate(timeout=30)[1]}")
    time.sleep(0.3)
    up.send_signal(signal.SIGINT)  # Ctrl-C
    _, stderr = up.communicate(timeout=30)
    assert up.returncode != 0 and "KeyboardInterrupt" in stderr

    assert sagemaker.describe_endpoint(EndpointName=name)["EndpointStatus"] == "Creating", "it bills"
    stored = moto.client("scheduler").get_schedule(Name="gemma4-t4-ttl-backstop")
    assert stored["ScheduleExpression"] == backstop["scheduleExpression"]
    # `preflight` names it, with the line that deletes it, when the stack's state holds no endpoint.
    for key, value in moto.env().items():
        monkeypatch.setenv(key, value)
    check = preflight.strays_check("us-east-2", preflight.fetch_stack_endpoints("us-east-2", SCOPE), "", SCOPE)
    assert check is not None and f"aws sagemaker delete-endpoint --endpoint-name {name} --region us-east-2" in \
        check.fix
    # ... but first the line that adopts it: it is the stack's pending create, and it serves once InService.
    assert "--import-pending-creates 'urn:pulumi:sagemaker-t4::gemma4-t4::" in check.fix and f"' {name}" in check.fix
    set_endpoint_status(name, "InService")
    fired = fire_schedule(moto, "gemma4-t4-ttl-backstop",
                          lambda request: f"arn:aws:sagemaker:us-east-2:{ACCOUNT}:endpoint/{request['EndpointName']}")
    assert fired.delivered and name not in [e["EndpointName"] for e in sagemaker.list_endpoints()["Endpoints"]]


def stack_endpoint(moto, name: str, stack: str = "sagemaker-t4", project: str = "gemma4-t4", fleet: str = "") -> None:
    """An endpoint tagged as the component tags its own: the organization, project and stack (and its fleet's key)."""
    sagemaker = moto.client("sagemaker")
    if not sagemaker.list_endpoint_configs(NameContains="c")["EndpointConfigs"]:
        sagemaker.create_model(ModelName="m", ExecutionRoleArn=f"arn:aws:iam::{ACCOUNT}:role/x",
                               PrimaryContainer={"Image": f"{ACCOUNT}.dkr.ecr.us-east-2.amazonaws.com/r@sha256:0"})
        sagemaker.create_endpoint_config(EndpointConfigName="c", ProductionVariants=[
            {"VariantName": "AllTraffic", "ModelName": "m", "InstanceType": "ml.g4dn.xlarge",
             "InitialInstanceCount": 1}])
    tags = {**StackScope(stack, project, "organization").tags(), **({catalog.SAGEMAKER_FLEET_TAG: fleet} if fleet else {})}
    sagemaker.create_endpoint(EndpointName=name, EndpointConfigName="c", Tags=[
        {"Key": key, "Value": value} for key, value in tags.items()])


@pytest.fixture
def account(moto, monkeypatch):
    moto.reset()
    for key, value in moto.env().items():
        monkeypatch.setenv(key, value)
    return moto


def test_status_and_preflight_name_an_endpoint_outside_the_stacks_state(account):
    stack_endpoint(account, "sagemaker-t4-endpoint-aaaaaaaa")  # the stack's, in its state
    # Left by an `up` killed during its wait: its logical name carries its fleet's id (components/sagemaker/fleet.py).
    stack_endpoint(account, "sagemaker-t4-endpoint-bbbbbbbb", fleet="0f1e2d3c4b5a6978")
    stack_endpoint(account, "someone-elses", stack="another-stack")
    # A colleague's stack of the same name in another project of the account: never this stack's.
    stack_endpoint(account, "sagemaker-t4-endpoint-cccccccc", project="another-project")
    outputs = {"cloud": "sagemaker", "target": {"endpoint_name": "sagemaker-t4-endpoint-aaaaaaaa", "region": "us-east-2",
                                                "stack_tags": StackScope("sagemaker-t4", "gemma4-t4",
                                                                         "organization").tags()}}
    details = clouds.target_from_outputs("sagemaker-t4", outputs).describe()
    (stray,) = details["not_in_the_stack"]
    # Adopted first (an `up` stopped during its creation left a pending create for it), deleted only otherwise.
    assert stray.startswith("sagemaker-t4-endpoint-bbbbbbbb (InService, not in the stack's state, bills): ")
    adopt = ("pulumi refresh --stack sagemaker-t4 --import-pending-creates 'urn:pulumi:sagemaker-t4::gemma4-t4::"
             "gemma4-t4:index:SageMakerT4Endpoint$aws:sagemaker/endpoint:Endpoint::gemma4-t4-endpoint-0f1e2d3c' "
             "sagemaker-t4-endpoint-bbbbbbbb")
    delete = "aws sagemaker delete-endpoint --endpoint-name sagemaker-t4-endpoint-bbbbbbbb --region us-east-2"
    assert adopt in stray and delete in stray and stray.index(adopt) < stray.index(delete)

    tagged = preflight.fetch_stack_endpoints("us-east-2", SCOPE)
    assert sorted(tagged) == [("sagemaker-t4-endpoint-aaaaaaaa", "InService", ""),
                              ("sagemaker-t4-endpoint-bbbbbbbb", "InService", "0f1e2d3c4b5a6978")]
    known = preflight.strays_check("us-east-2", tagged, "sagemaker-t4-endpoint-aaaaaaaa", SCOPE)
    assert known is not None and known.warning and "sagemaker-t4-endpoint-aaaaaaaa" not in known.fix
    assert "--endpoint-name sagemaker-t4-endpoint-bbbbbbbb --region us-east-2" in known.fix
    unknown = preflight.strays_check("us-east-2", tagged, None, SCOPE)  # no Pulumi CLI to read the state
    assert unknown is not None and "only one endpoint can be the stack's" in unknown.detail
    assert preflight.strays_check("us-east-2", tagged[:1], None, SCOPE) is None
    assert preflight.strays_check("us-east-2", [("sagemaker-t4-endpoint-aaaaaaaa", "InService")],
                                  "sagemaker-t4-endpoint-aaaaaaaa", SCOPE) is None


# --- a lowered TTL ------------------------------------------------------------------------------------------


def test_the_deadline_check_runs_when_the_deadline_changes(run_stack):
    plan = run_stack("sagemaker-t4", "endpointTtl=8h")
    step = plan.one(COMMAND, "gemma4-t4-ttl-passed")
    assert step.inputs["triggers"] == [plan.outputs["endpoint_deletes_at"]]
    assert json.loads(step.inputs["environment"][ttl_passed.REQUEST_ENV]) == {
        "endpoint_name": plan.one(ENDPOINT).inputs["name"], "deletes_at": plan.outputs["endpoint_deletes_at"]}
    assert urn(plan, COMMAND, "gemma4-t4-ttl-passed") in plan.one(SCHEDULE, "gemma4-t4-ttl").options["dependsOn"], \
        "a passed deadline is acted on before the schedule is moved to it"
    lowered = run_stack("sagemaker-t4", "endpointTtl=1h").one(COMMAND, "gemma4-t4-ttl-passed")
    assert lowered.inputs["triggers"] != step.inputs["triggers"], "a lowered TTL runs it again"


def run_deadline_check(moto, name: str, deletes_at: str) -> subprocess.CompletedProcess:
    env = {"PATH": os.environ["PATH"], **moto.env(),
           ttl_passed.REQUEST_ENV: json.dumps({"endpoint_name": name, "deletes_at": deletes_at})}
    return subprocess.run([sys.executable, "-m", ttl_passed.MODULE], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=60)


def test_a_lowered_ttl_whose_deadline_has_passed_deletes_the_endpoint_now(account):
    stack_endpoint(account, "sagemaker-t4-endpoint-aaaaaaaa")
    ahead = (datetime.now(UTC) + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    result = run_deadline_check(account, "sagemaker-t4-endpoint-aaaaaaaa", ahead)
    assert result.returncode == 0 and result.stderr == ""
    assert account.client("sagemaker").list_endpoints()["Endpoints"], "a deadline ahead: left to the schedule"

    passed = (datetime.now(UTC) - timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%SZ")
    result = run_deadline_check(account, "sagemaker-t4-endpoint-aaaaaaaa", passed)
    assert result.returncode == 0 and "deleted sagemaker-t4-endpoint-aaaaaaaa now" in result.stderr
    assert account.client("sagemaker").list_endpoints()["Endpoints"] == []
    again = run_deadline_check(account, "sagemaker-t4-endpoint-aaaaaaaa", passed)
    assert again.returncode == 0 and "already gone" in again.stderr


# --- the dead-letter queue, read for the current endpoint only -----------------------------------------------


def test_status_reads_only_the_current_endpoints_failed_deletes(account, monkeypatch):
    """After a delete that worked, the backstop's delete finds nothing and lands in the queue (kept 14 days); a
    later endpoint of the same name (`pulumi refresh`, then `up`) is not reported as undeleted for it. A delete
    of the current endpoint that failed is."""
    sqs, iam, scheduler = account.client("sqs"), account.client("iam"), account.client("scheduler")
    queue_url = sqs.create_queue(QueueName="dlq")["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    name = "sagemaker-t4-endpoint-aaaaaaaa"
    role_arn = iam.create_role(RoleName="ttl", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    iam.put_role_policy(RoleName="ttl", PolicyName="p", PolicyDocument=json.dumps({"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Action": "sagemaker:DeleteEndpoint", "Resource": f"arn:aws:sagemaker:us-east-2:123456789012:endpoint/{name}"},
        {"Effect": "Allow", "Action": "sqs:SendMessage", "Resource": queue_arn}]}))
    for schedule in ("ttl", "ttl-backstop"):
        scheduler.create_schedule(Name=schedule, ScheduleExpression="at(2030-01-01T00:00:00)",
                                  FlexibleTimeWindow={"Mode": "OFF"},
                                  Target={"Arn": ttl.DELETE_ENDPOINT_TARGET, "RoleArn": role_arn,
                                          "Input": json.dumps({"EndpointName": name}),
                                          "DeadLetterConfig": {"Arn": queue_arn}})
    arn = lambda request: f"arn:aws:sagemaker:us-east-2:{ACCOUNT}:endpoint/{request['EndpointName']}"  # noqa: E731
    stack_endpoint(account, name)
    assert fire_schedule(account, "ttl", arn, max_attempts=1).delivered
    assert not fire_schedule(account, "ttl-backstop", arn, max_attempts=1).delivered  # lands in the queue
    time.sleep(1.1)  # SentTimestamp and CreationTime: the next endpoint is created after the letter
    stack_endpoint(account, name)  # the next `up`, same configuration, same name
    outputs = {"cloud": "sagemaker", "target": {"endpoint_name": name, "region": "us-east-2"},
               "endpoint_deletes_at": "2030-01-01T00:00:00Z", "ttl_dead_letter_queue_url": queue_url}
    details = clouds.target_from_outputs("sagemaker-t4", outputs).describe()
    assert details["ttl_failed_deletes"] == 0 and "ttl_warning" not in details

    from test_sagemaker_ttl import refuse_delete_while_busy

    refuse_delete_while_busy(monkeypatch)
    set_endpoint_status(name, "Updating")
    assert not fire_schedule(account, "ttl", arn, max_attempts=1).delivered
    details = clouds.target_from_outputs("sagemaker-t4", outputs).describe()
    assert details["ttl_failed_deletes"] == 1 and "NOT deleted and bills" in details["ttl_warning"]
