"""The TTL schedule the stack plans, created in moto through the real APIs and fired as EventBridge
Scheduler fires a universal target (tests/aws_standin.py): the endpoint is deleted with the
schedule's own role; a delete refused while the endpoint is busy is retried; what keeps failing
reaches the dead-letter queue. Budget: ~10 s."""

from __future__ import annotations

import json
import re

import pytest
from aws_standin import allows, fire_schedule, set_endpoint_status

from gemma4_t4 import clouds

pytestmark = pytest.mark.standin

SCHEDULE = "aws:scheduler/schedule:Schedule"
# EventBridge Scheduler's one-time expression (API reference, ScheduleExpression).
AT = re.compile(r"at\(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\)")


@pytest.fixture
def deployed(moto, run_stack, monkeypatch):
    """The planned TTL resources made in moto for a real (moto) endpoint; returns the schedule name."""
    moto.reset()
    refuse_delete_while_busy(monkeypatch)
    plan = run_stack("sagemaker-t4", "endpointTtl=8h")
    sagemaker, iam, sqs = moto.client("sagemaker"), moto.client("iam"), moto.client("sqs")
    sagemaker.create_model(ModelName="m", ExecutionRoleArn="arn:aws:iam::123456789012:role/x",
                           PrimaryContainer={"Image": "123456789012.dkr.ecr.us-east-2.amazonaws.com/r@sha256:0"})
    sagemaker.create_endpoint_config(EndpointConfigName="c", ProductionVariants=[
        {"VariantName": "AllTraffic", "ModelName": "m", "InstanceType": "ml.g4dn.xlarge", "InitialInstanceCount": 1}])
    endpoint_arn = sagemaker.create_endpoint(EndpointName="gemma", EndpointConfigName="c")["EndpointArn"]

    queue = plan.one("aws:sqs/queue:Queue").inputs
    queue_url = sqs.create_queue(QueueName="gemma4-t4-ttl-dlq", Attributes={
        "MessageRetentionPeriod": str(int(queue["messageRetentionSeconds"])),
        "SqsManagedSseEnabled": str(queue["sqsManagedSseEnabled"]).lower()})["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]

    # The planned names and ARNs, replaced by the ones moto gave.
    planned = {plan.one("aws:sagemaker/endpoint:Endpoint").state["arn"]: endpoint_arn,
               plan.one("aws:sagemaker/endpoint:Endpoint").state["name"]: "gemma",
               plan.one("aws:sqs/queue:Queue").state["arn"]: queue_arn}

    def real(text: str) -> str:
        for mock, actual in planned.items():
            text = text.replace(mock, actual)
        return text

    role = plan.find("aws:iam/role:Role", "gemma4-t4-ttl")[0].inputs
    role_arn = iam.create_role(RoleName="gemma4-t4-ttl", AssumeRolePolicyDocument=role["assumeRolePolicy"])["Role"]["Arn"]
    policy = plan.find("aws:iam/rolePolicy:RolePolicy", "gemma4-t4-ttl-policy")[0].inputs["policy"]
    iam.put_role_policy(RoleName="gemma4-t4-ttl", PolicyName="gemma4-t4-ttl-policy", PolicyDocument=real(policy))

    for name in ("gemma4-t4-ttl", "gemma4-t4-ttl-backstop"):
        schedule = plan.one(SCHEDULE, name).inputs
        target = schedule["target"]
        moto.client("scheduler").create_schedule(
            Name=name, ScheduleExpression=schedule["scheduleExpression"],
            ScheduleExpressionTimezone=schedule["scheduleExpressionTimezone"],
            FlexibleTimeWindow={"Mode": schedule["flexibleTimeWindow"]["mode"]},
            Target={"Arn": target["arn"], "RoleArn": role_arn, "Input": real(target["input"]),
                    "RetryPolicy": {"MaximumRetryAttempts": int(target["retryPolicy"]["maximumRetryAttempts"]),
                                    "MaximumEventAgeInSeconds": int(
                                        target["retryPolicy"]["maximumEventAgeInSeconds"])},
                    "DeadLetterConfig": {"Arn": queue_arn}})
    return {"schedule": "gemma4-t4-ttl", "backstop": "gemma4-t4-ttl-backstop", "queue_url": queue_url,
            "endpoint_arn": endpoint_arn, "expression": plan.one(SCHEDULE, "gemma4-t4-ttl").inputs[
                "scheduleExpression"]}


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


def endpoint_exists(moto) -> bool:
    return any(e["EndpointName"] == "gemma" for e in moto.client("sagemaker").list_endpoints()["Endpoints"])


def test_the_schedule_is_accepted_and_deletes_the_endpoint(moto, deployed):
    assert AT.fullmatch(deployed["expression"])
    firing = fire_schedule(moto, deployed["schedule"], endpoint_arn_of)
    assert firing.delivered and firing.attempts == 1 and not endpoint_exists(moto)
    assert dead_letters(moto, deployed["queue_url"]) == []


def test_a_delete_refused_while_the_endpoint_updates_is_retried(moto, deployed):
    set_endpoint_status("gemma", "Updating")

    def update_ends(attempt):
        if attempt == 3:
            set_endpoint_status("gemma", "InService")

    firing = fire_schedule(moto, deployed["schedule"], endpoint_arn_of, before_attempt=update_ends)
    assert firing.delivered and firing.attempts == 3 and not endpoint_exists(moto)
    assert all("Cannot update in-progress endpoint" in e for e in firing.errors)


def test_a_delete_that_keeps_failing_lands_in_the_dead_letter_queue(moto, deployed):
    set_endpoint_status("gemma", "Updating")
    firing = fire_schedule(moto, deployed["schedule"], endpoint_arn_of, max_attempts=4)
    assert not firing.delivered and endpoint_exists(moto)
    (letter,) = dead_letters(moto, deployed["queue_url"])
    assert json.loads(letter["input"]) == {"EndpointName": "gemma"}
    assert len(letter["errors"]) == 4 and "Cannot update in-progress endpoint" in letter["errors"][-1]


def test_a_delete_refused_at_the_deadline_and_not_retried_is_done_by_the_backstop(moto, deployed):
    """Whether Scheduler retries a universal target's 4xx is undocumented: here it does not (one attempt).
    The endpoint is Updating at the deadline, the first delete is refused and lands in the dead-letter
    queue; the update ends; an hour later the backstop deletes the endpoint."""
    set_endpoint_status("gemma", "Updating")
    first = fire_schedule(moto, deployed["schedule"], endpoint_arn_of, max_attempts=1)
    assert not first.delivered and endpoint_exists(moto)
    assert first.errors == [f'ValidationException: Cannot update in-progress endpoint "{deployed["endpoint_arn"]}".']
    set_endpoint_status("gemma", "InService")
    backstop = fire_schedule(moto, deployed["backstop"], endpoint_arn_of, max_attempts=1)
    assert backstop.delivered and not endpoint_exists(moto)
    assert len(dead_letters(moto, deployed["queue_url"])) == 1, "only the refused first attempt"


def test_after_a_delete_that_worked_the_backstop_finds_nothing_to_delete(moto, deployed):
    assert fire_schedule(moto, deployed["schedule"], endpoint_arn_of, max_attempts=1).delivered
    backstop = fire_schedule(moto, deployed["backstop"], endpoint_arn_of, max_attempts=1)
    assert not backstop.delivered and not endpoint_exists(moto)
    assert "Could not find endpoint" in backstop.errors[0]


def test_the_role_may_delete_only_its_endpoint(moto, deployed):
    other = {"EndpointName": "someone-elses"}
    policy = moto.client("iam").get_role_policy(RoleName="gemma4-t4-ttl", PolicyName="gemma4-t4-ttl-policy")
    assert allows(policy["PolicyDocument"], "sagemaker:DeleteEndpoint", deployed["endpoint_arn"])
    assert not allows(policy["PolicyDocument"], "sagemaker:DeleteEndpoint", endpoint_arn_of(other))
    assert not allows(policy["PolicyDocument"], "sagemaker:DeleteEndpointConfig", deployed["endpoint_arn"])


def test_after_it_fired_the_stack_still_plans_and_the_endpoint_is_gone(moto, deployed, run_stack):
    """What `pulumi up` meets after the TTL: the program plans exactly as before (nothing in it reads
    the time), so `up` changes nothing; the endpoint is gone from AWS, which `pulumi refresh` records."""
    before = run_stack("sagemaker-t4", "endpointTtl=8h").one(SCHEDULE, "gemma4-t4-ttl").inputs["scheduleExpression"]
    assert fire_schedule(moto, deployed["schedule"], endpoint_arn_of).delivered
    assert run_stack("sagemaker-t4", "endpointTtl=8h").one(SCHEDULE, "gemma4-t4-ttl").inputs["scheduleExpression"] == before
    with pytest.raises(moto.client("sagemaker").exceptions.ClientError, match="Could not find endpoint"):
        moto.client("sagemaker").describe_endpoint(EndpointName="gemma")


def test_status_says_when_the_ttl_fires_and_warns_of_a_delete_that_failed(moto, deployed, monkeypatch):
    """The operator's `status --stack` reads the stack's TTL outputs: the deadline, and the
    dead-letter queue, whose messages mean the endpoint was not deleted and still bills."""

    for key, value in moto.env().items():
        monkeypatch.setenv(key, value)
    outputs = {"cloud": "sagemaker", "target": {"endpoint_name": "gemma", "region": "us-east-2"},
               "endpoint_deletes_at": "2026-12-03T18:00:00Z", "ttl_dead_letter_queue_url": deployed["queue_url"]}
    details = clouds.target_from_outputs("sagemaker-t4", outputs).describe()
    assert details["ttl_deletes_at"] == "2026-12-03T18:00:00Z" and details["ttl_failed_deletes"] == 0
    assert "ttl_warning" not in details

    set_endpoint_status("gemma", "Updating")
    assert not fire_schedule(moto, deployed["schedule"], endpoint_arn_of, max_attempts=2).delivered
    details = clouds.target_from_outputs("sagemaker-t4", outputs).describe()
    assert details["ttl_failed_deletes"] == 1 and "NOT deleted and bills" in details["ttl_warning"]
