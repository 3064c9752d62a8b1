"""The TTL schedule the stack plans, created in moto through the real APIs and fired as EventBridge
Scheduler fires a universal target (tests/aws_standin.py): the endpoint is deleted with the
schedule's own role; a delete refused while the endpoint is busy is retried; what keeps failing
reaches the dead-letter queue. The deadline is the endpoint's CreationTime plus the TTL, read by the
component's creation-time step, run here against moto as pulumi-command runs it (MotoWorld): a new endpoint
under the same name after the TTL fired gets a new one. Budget: ~40 s."""

from __future__ import annotations

import functools
import json
import re
from datetime import UTC, datetime, timedelta

import pytest
from aws_standin import MotoWorld, allows, fire_schedule, set_endpoint_created, set_endpoint_status
from conftest import REPO

from gemma4_t4 import clouds
from gemma4_t4.components.sagemaker.steps import created_at, ttl_passed

pytestmark = pytest.mark.standin

SCHEDULE = "aws:scheduler/schedule:Schedule"
QUEUE = "aws:sqs/queue:Queue"
ALARM = "aws:cloudwatch/metricAlarm:MetricAlarm"
ENDPOINT = "aws:sagemaker/endpoint:Endpoint"
TTL_PASSED = ("command:local:Command", "gemma4-t4-ttl-passed")
# EventBridge Scheduler's one-time expression (API reference, ScheduleExpression).
AT = re.compile(r"at\(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\)")


def at(when: datetime) -> str:
    return f"at({when:%Y-%m-%dT%H:%M:%S})"


def utc(when: datetime) -> str:
    return f"{when:%Y-%m-%dT%H:%M:%SZ}"


def seconds_ago(seconds: float) -> datetime:
    return (datetime.now(UTC) - timedelta(seconds=seconds)).replace(microsecond=0)


@functools.cache
def planned_endpoint_name() -> str:
    """The endpoint's name as the stack makes it (from its configuration's), known before it exists."""
    return clouds.plan_stack("sagemaker-t4", (), REPO)[1].one(ENDPOINT).state["name"]


def create_endpoint(moto, name: str, created: datetime) -> str:
    """NAME in moto, created at CREATED (its CreationTime); returns its ARN."""
    sagemaker = moto.client("sagemaker")
    if not sagemaker.list_models()["Models"]:
        sagemaker.create_model(ModelName="m", ExecutionRoleArn="arn:aws:iam::123456789012:role/x",
                               PrimaryContainer={"Image": "123456789012.dkr.ecr.us-east-2.amazonaws.com/r@sha256:0"})
        sagemaker.create_endpoint_config(EndpointConfigName="c", ProductionVariants=[
            {"VariantName": "AllTraffic", "ModelName": "m", "InstanceType": "ml.g4dn.xlarge",
             "InitialInstanceCount": 1}])
    arn = sagemaker.create_endpoint(EndpointName=name, EndpointConfigName="c")["EndpointArn"]
    set_endpoint_created(name, created)
    return arn


def plan_against(moto, run_stack, *overrides: str):
    """The stack's plan with its creation-time step run against moto (`pulumi up` or preview there)."""
    return run_stack("sagemaker-t4", *overrides, world={"sagemaker": MotoWorld(aws=moto)})


def schedule_request(plan, name: str, role_arn: str, queue_arn: str) -> dict:
    """The schedule NAME as the provider sends it (CreateSchedule and UpdateSchedule take the whole schedule)."""
    schedule = plan.one(SCHEDULE, name).inputs
    target = schedule["target"]
    return {"Name": name, "ScheduleExpression": schedule["scheduleExpression"],
            "ScheduleExpressionTimezone": schedule["scheduleExpressionTimezone"],
            "FlexibleTimeWindow": {"Mode": schedule["flexibleTimeWindow"]["mode"]},
            "Target": {"Arn": target["arn"], "RoleArn": role_arn, "Input": target["input"],
                       "RetryPolicy": {"MaximumRetryAttempts": int(target["retryPolicy"]["maximumRetryAttempts"]),
                                       "MaximumEventAgeInSeconds": int(
                                           target["retryPolicy"]["maximumEventAgeInSeconds"])},
                       "DeadLetterConfig": {"Arn": queue_arn}}}


def make_queue(moto, plan, name: str) -> tuple[str, str]:
    """The planned queue NAME made in moto: its URL and ARN."""
    sqs = moto.client("sqs")
    queue = plan.one(QUEUE, name).inputs
    url = sqs.create_queue(QueueName=name, Attributes={
        "MessageRetentionPeriod": str(int(queue["messageRetentionSeconds"])),
        "SqsManagedSseEnabled": str(queue["sqsManagedSseEnabled"]).lower()})["QueueUrl"]
    return url, sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]


@pytest.fixture
def deployed(moto, run_stack, monkeypatch):
    """The planned TTL resources made in moto for the stack's endpoint, made in moto an hour ago."""
    moto.reset()
    refuse_delete_while_busy(monkeypatch)
    name, created = planned_endpoint_name(), seconds_ago(3600)
    endpoint_arn = create_endpoint(moto, name, created)
    plan = plan_against(moto, run_stack, "endpointTtl=8h")
    iam = moto.client("iam")

    queue_url, queue_arn = make_queue(moto, plan, "gemma4-t4-ttl-dlq")
    backstop_url, backstop_arn = make_queue(moto, plan, "gemma4-t4-ttl-backstop-dlq")
    assert plan.one(ENDPOINT).state["arn"] == endpoint_arn

    role = plan.find("aws:iam/role:Role", "gemma4-t4-ttl")[0].inputs
    role_arn = iam.create_role(RoleName="gemma4-t4-ttl", AssumeRolePolicyDocument=role["assumeRolePolicy"])["Role"]["Arn"]
    policy = plan.find("aws:iam/rolePolicy:RolePolicy", "gemma4-t4-ttl-policy")[0].inputs["policy"]
    for planned, made in ((queue_arn, "gemma4-t4-ttl-dlq"), (backstop_arn, "gemma4-t4-ttl-backstop-dlq")):
        policy = policy.replace(plan.one(QUEUE, made).state["arn"], planned)
    iam.put_role_policy(RoleName="gemma4-t4-ttl", PolicyName="gemma4-t4-ttl-policy", PolicyDocument=policy)

    scheduler = moto.client("scheduler")
    scheduler.create_schedule(**schedule_request(plan, "gemma4-t4-ttl", role_arn, queue_arn))
    scheduler.create_schedule(**schedule_request(plan, "gemma4-t4-ttl-backstop", role_arn, backstop_arn))
    make_alarm(moto, plan, queue_name="gemma4-t4-ttl-dlq")
    return {"schedule": "gemma4-t4-ttl", "backstop": "gemma4-t4-ttl-backstop", "queue_url": queue_url,
            "queue_arn": queue_arn, "backstop_queue_url": backstop_url, "role_arn": role_arn, "endpoint": name,
            "endpoint_arn": endpoint_arn, "created": created, "plan": plan,
            "expression": plan.one(SCHEDULE, "gemma4-t4-ttl").inputs["scheduleExpression"]}


def make_alarm(moto, plan, queue_name: str) -> None:
    """The planned alarm and its topic made in moto, on the queue the plan names (by its moto name)."""
    topic_arn = moto.client("sns").create_topic(Name="gemma4-t4-ttl-alarm")["TopicArn"]
    alarm = plan.one(ALARM, "gemma4-t4-ttl-delete-failed").inputs
    queues = {q.state["name"]: q.name for q in plan.find(QUEUE)}
    (dimension,) = alarm["dimensions"].items()
    assert dimension[0] == "QueueName" and queues[dimension[1]] == queue_name, (dimension, queues)
    moto.client("cloudwatch").put_metric_alarm(
        AlarmName="gemma4-t4-ttl-delete-failed", Namespace=alarm["namespace"], MetricName=alarm["metricName"],
        Statistic=alarm["statistic"], Period=int(alarm["period"]), EvaluationPeriods=int(alarm["evaluationPeriods"]),
        Threshold=alarm["threshold"], ComparisonOperator=alarm["comparisonOperator"],
        TreatMissingData=alarm["treatMissingData"], Dimensions=[{"Name": "QueueName", "Value": queue_name}],
        AlarmActions=[topic_arn])


def alarm_fires(moto) -> bool:
    """CloudWatch's verdict on the alarm from its queue's metric, evaluated here (moto does not evaluate alarms):
    ApproximateNumberOfMessagesVisible is the queue's ApproximateNumberOfMessages attribute (Amazon SQS Developer
    Guide, "Available CloudWatch metrics for Amazon SQS"), compared as the alarm says."""
    (alarm,) = moto.client("cloudwatch").describe_alarms(AlarmNames=["gemma4-t4-ttl-delete-failed"])["MetricAlarms"]
    assert alarm["MetricName"] == "ApproximateNumberOfMessagesVisible" and alarm["Namespace"] == "AWS/SQS"
    assert alarm["ComparisonOperator"] == "GreaterThanOrEqualToThreshold" and alarm["AlarmActions"]
    sqs = moto.client("sqs")
    url = sqs.get_queue_url(QueueName=alarm["Dimensions"][0]["Value"])["QueueUrl"]
    visible = int(sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])[
        "Attributes"]["ApproximateNumberOfMessages"])
    return visible >= alarm["Threshold"]


def refuse_delete_while_busy(monkeypatch) -> None:
    """SageMaker refuses to delete an endpoint that is being created or updated ([sagemaker-t4-article]'s
    tooling met it as "Cannot update in-progress endpoint"); moto deletes it anyway."""
    from moto.sagemaker.exceptions import ValidationError
    from moto.sagemaker.models import SageMakerModelBackend

    original = SageMakerModelBackend.delete_endpoint

    def delete_endpoint(self, endpoint_name):
        endpoint = self.endpoints.get(endpoint_name)
        if endpoint is not None and endpoint.endpoint_status in ("Creating", "Updating"):
            raise ValidationError(message=f"Cannot update in-progress endpoint \"{endpoint.arn}\".")
        return original(self, endpoint_name)

    monkeypatch.setattr(SageMakerModelBackend, "delete_endpoint", delete_endpoint)


def endpoint_arn_of(request: dict) -> str:
    return f"arn:aws:sagemaker:us-east-2:123456789012:endpoint/{request['EndpointName'].lower()}"


def dead_letters(moto, queue_url: str) -> list[dict]:
    messages = moto.client("sqs").receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10).get("Messages", [])
    return [json.loads(m["Body"]) for m in messages]


def endpoint_exists(moto, name: str) -> bool:
    return any(e["EndpointName"] == name for e in moto.client("sagemaker").list_endpoints()["Endpoints"])


def test_the_schedule_is_accepted_and_deletes_the_endpoint(moto, deployed):
    assert AT.fullmatch(deployed["expression"])
    firing = fire_schedule(moto, deployed["schedule"], endpoint_arn_of)
    assert firing.delivered and firing.attempts == 1 and not endpoint_exists(moto, deployed["endpoint"])
    assert dead_letters(moto, deployed["queue_url"]) == []


def test_a_delete_refused_while_the_endpoint_updates_is_retried(moto, deployed):
    set_endpoint_status(deployed["endpoint"], "Updating")

    def update_ends(attempt):
        if attempt == 3:
            set_endpoint_status(deployed["endpoint"], "InService")

    firing = fire_schedule(moto, deployed["schedule"], endpoint_arn_of, before_attempt=update_ends)
    assert firing.delivered and firing.attempts == 3 and not endpoint_exists(moto, deployed["endpoint"])
    assert all("Cannot update in-progress endpoint" in e for e in firing.errors)


def test_a_delete_that_keeps_failing_lands_in_the_dead_letter_queue(moto, deployed):
    set_endpoint_status(deployed["endpoint"], "Updating")
    firing = fire_schedule(moto, deployed["schedule"], endpoint_arn_of, max_attempts=4)
    assert not firing.delivered and endpoint_exists(moto, deployed["endpoint"])
    assert alarm_fires(moto), "a delete that really failed: the endpoint bills on"
    (letter,) = dead_letters(moto, deployed["queue_url"])
    assert json.loads(letter["input"]) == {"EndpointName": deployed["endpoint"]}
    assert len(letter["errors"]) == 4 and "Cannot update in-progress endpoint" in letter["errors"][-1]


def test_a_delete_refused_at_the_deadline_and_not_retried_is_done_by_the_backstop(moto, deployed):
    """Whether Scheduler retries a universal target's 4xx is undocumented: here it does not (one attempt).
    The endpoint is Updating at the deadline, the first delete is refused and lands in the dead-letter
    queue; the update ends; an hour later the backstop deletes the endpoint."""
    set_endpoint_status(deployed["endpoint"], "Updating")
    first = fire_schedule(moto, deployed["schedule"], endpoint_arn_of, max_attempts=1)
    assert not first.delivered and endpoint_exists(moto, deployed["endpoint"])
    assert first.errors == [f'ValidationException: Cannot update in-progress endpoint "{deployed["endpoint_arn"]}".']
    set_endpoint_status(deployed["endpoint"], "InService")
    backstop = fire_schedule(moto, deployed["backstop"], endpoint_arn_of, max_attempts=1)
    assert backstop.delivered and not endpoint_exists(moto, deployed["endpoint"])
    assert len(dead_letters(moto, deployed["queue_url"])) == 1, "only the refused first attempt"


def test_after_a_delete_that_worked_the_backstop_finds_nothing_to_delete(moto, deployed):
    assert fire_schedule(moto, deployed["schedule"], endpoint_arn_of, max_attempts=1).delivered
    backstop = fire_schedule(moto, deployed["backstop"], endpoint_arn_of, max_attempts=1)
    assert not backstop.delivered and not endpoint_exists(moto, deployed["endpoint"])
    assert "Could not find endpoint" in backstop.errors[0]
    # Its harmless failure lands in its own queue, which no alarm watches: nobody is told of a failed delete.
    assert not alarm_fires(moto)
    assert dead_letters(moto, deployed["queue_url"]) == []
    (letter,) = dead_letters(moto, deployed["backstop_queue_url"])
    assert letter["schedule"] == deployed["backstop"]


def test_the_role_may_delete_only_its_endpoint(moto, deployed):
    other = {"EndpointName": "someone-elses"}
    policy = moto.client("iam").get_role_policy(RoleName="gemma4-t4-ttl", PolicyName="gemma4-t4-ttl-policy")
    assert allows(policy["PolicyDocument"], "sagemaker:DeleteEndpoint", deployed["endpoint_arn"])
    assert not allows(policy["PolicyDocument"], "sagemaker:DeleteEndpoint", endpoint_arn_of(other))
    assert not allows(policy["PolicyDocument"], "sagemaker:DeleteEndpointConfig", deployed["endpoint_arn"])


def test_status_says_when_the_ttl_fires_and_warns_of_a_delete_that_failed(moto, deployed, monkeypatch):
    """The operator's `status --stack` reads the stack's TTL outputs: the deadline (the plan's, from the endpoint's
    CreationTime), and the dead-letter queue, whose messages mean the endpoint was not deleted and still bills."""

    for key, value in moto.env().items():
        monkeypatch.setenv(key, value)
    plan_outputs = deployed["plan"].outputs
    assert plan_outputs["endpoint_deletes_at"] == utc(deployed["created"] + timedelta(hours=8))
    outputs = {"cloud": "sagemaker", "target": {"endpoint_name": deployed["endpoint"], "region": "us-east-2"},
               "endpoint_deletes_at": plan_outputs["endpoint_deletes_at"],
               "ttl_dead_letter_queue_url": deployed["queue_url"],
               "ttl_backstop_dead_letter_queue_url": deployed["backstop_queue_url"]}
    details = clouds.target_from_outputs("sagemaker-t4", outputs).describe()
    assert details["ttl_deletes_at"] == plan_outputs["endpoint_deletes_at"] and details["ttl_failed_deletes"] == 0
    assert "ttl_warning" not in details

    set_endpoint_status(deployed["endpoint"], "Updating")
    assert not fire_schedule(moto, deployed["schedule"], endpoint_arn_of, max_attempts=2).delivered
    details = clouds.target_from_outputs("sagemaker-t4", outputs).describe()
    assert details["ttl_failed_deletes"] == 1 and "NOT deleted and bills" in details["ttl_warning"]
    # The backstop refused too (the endpoint still Updating an hour on): its letter names the endpoint still there.
    assert not fire_schedule(moto, deployed["backstop"], endpoint_arn_of, max_attempts=1).delivered
    details = clouds.target_from_outputs("sagemaker-t4", outputs).describe()
    assert details["ttl_failed_deletes"] == 2 and deployed["backstop_queue_url"] in details["ttl_warning"]


# --- the deadline follows the endpoint's CreationTime ---------------------------------------------


def test_a_new_endpoint_under_the_same_name_after_the_ttl_gets_a_new_deadline(moto, deployed, run_stack):
    """up (endpoint created at T1) -> the TTL fires -> refresh, up: a new endpoint of the same name, created at T2
    -> its schedule is moved to T2 + TTL. (Before: the deadline was a clock kept in the state and read again only
    for a new endpoint id, which the same name is not: the new endpoint kept the fired deadline and billed on.)"""
    name, first = deployed["endpoint"], deployed["created"]
    plan = deployed["plan"]
    assert deployed["expression"] == at(first + timedelta(hours=8))
    assert plan.one(*TTL_PASSED).inputs["triggers"] == [utc(first + timedelta(hours=8))]
    backstop = plan.one(SCHEDULE, "gemma4-t4-ttl-backstop").inputs["scheduleExpression"]

    assert fire_schedule(moto, deployed["schedule"], endpoint_arn_of).delivered
    assert not endpoint_exists(moto, name)
    # `pulumi refresh` drops the endpoint; `pulumi up` makes it again under the same name (same configuration).
    second = seconds_ago(0)
    create_endpoint(moto, name, second)
    plan = plan_against(moto, run_stack, "endpointTtl=8h")
    deadline = second + timedelta(hours=8)
    assert plan.outputs["endpoint_deletes_at"] == utc(deadline) and deadline > second
    assert plan.one(*TTL_PASSED).inputs["triggers"] == [utc(deadline)], "a new deadline runs the TTL check again"
    assert plan.one(SCHEDULE, "gemma4-t4-ttl").inputs["scheduleExpression"] == at(deadline)
    # The backstop's clock was read when the configuration first got its endpoint: it is not armed again.
    assert plan.one(SCHEDULE, "gemma4-t4-ttl-backstop").inputs["scheduleExpression"] == backstop

    # The provider updates the schedule from the plan's inputs (UpdateSchedule takes the whole schedule).
    moto.client("scheduler").update_schedule(**schedule_request(plan, deployed["schedule"], deployed["role_arn"],
                                                                deployed["queue_arn"]))
    assert moto.client("scheduler").get_schedule(Name=deployed["schedule"])["ScheduleExpression"] == at(deadline)
    check = MotoWorld(aws=moto).run_local_command({"command": ttl_passed.command(),
                                                   "environment": plan.one(*TTL_PASSED).inputs["environment"]})
    assert check["stderr"] == "" and endpoint_exists(moto, name), "the new deadline lies ahead"
    assert fire_schedule(moto, deployed["schedule"], endpoint_arn_of).delivered
    assert not endpoint_exists(moto, name)


def test_an_up_after_the_ttl_fired_without_a_refresh_says_to_refresh(moto, deployed, run_stack):
    """up -> the TTL fires -> up without `pulumi refresh`: the state still lists the endpoint, SageMaker has none,
    and the program stops at the creation-time step with its line. (Before: the `up` planned as if nothing had
    happened and changed nothing, and `status` still showed the fired deadline.)"""
    name = deployed["endpoint"]
    assert fire_schedule(moto, deployed["schedule"], endpoint_arn_of).delivered
    with pytest.raises(Exception) as refused:
        plan_against(moto, run_stack, "endpointTtl=8h")
    assert str(refused.value) == (
        f'invoke of command:local:run failed: invocation of command:local:run returned an error: exit status 1: '
        f'running {json.dumps(created_at.command())}:\ncreated-at: the endpoint {name} no longer exists (its TTL '
        "deleted it, or someone did): `pulumi up --refresh` (or `pulumi refresh`, then `pulumi up`) records that and "
        "makes a new endpoint with a new deadline\n")


def test_a_lowered_ttl_moves_the_deadline_from_the_same_creation_time(moto, deployed, run_stack):
    """endpointTtl 8h -> 30m on an endpoint created an hour ago: the deadline is its CreationTime + 30m, already
    past, and the TTL check that the new deadline runs deletes the endpoint during that `up`."""
    name, created = deployed["endpoint"], deployed["created"]
    lowered = plan_against(moto, run_stack, "endpointTtl=30m")
    assert lowered.outputs["endpoint_deletes_at"] == utc(created + timedelta(minutes=30))
    assert lowered.one(SCHEDULE, "gemma4-t4-ttl").inputs["scheduleExpression"] == at(created + timedelta(minutes=30))
    assert lowered.one(*TTL_PASSED).inputs["triggers"] != deployed["plan"].one(*TTL_PASSED).inputs["triggers"]
    check = MotoWorld(aws=moto).run_local_command({"command": ttl_passed.command(),
                                                   "environment": lowered.one(*TTL_PASSED).inputs["environment"]})
    assert f"deleted {name} now" in check["stderr"] and not endpoint_exists(moto, name)


def test_an_endpoint_adopted_after_a_ctrl_c_counts_from_its_creation_not_from_the_up(moto, run_stack):
    """An `up` stopped during the endpoint's wait, then `pulumi refresh --import-pending-creates` and `up` hours
    later: the endpoint was created 20 hours before that `up`, so a 24h TTL deletes it 4 hours after it. (Before:
    the clock was read at that later `up`, and the endpoint billed 20 hours past its TTL.)"""
    moto.reset()
    name, created = planned_endpoint_name(), seconds_ago(20 * 3600)
    create_endpoint(moto, name, created)
    plan = plan_against(moto, run_stack, "endpointTtl=24h")
    assert plan.outputs["endpoint_deletes_at"] == utc(created + timedelta(hours=24))
    assert plan.one(SCHEDULE, "gemma4-t4-ttl").inputs["scheduleExpression"] == at(created + timedelta(hours=24))
