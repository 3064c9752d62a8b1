"""The endpoint's TTL (endpointTtl): EventBridge Scheduler deletes the endpoint at its deadline, a backstop made
before CreateEndpoint deletes it if the `up` never got to the first schedule, and an alarm speaks up when the TTL's
delete really failed.

Two dead-letter queues, one per schedule: the TTL's schedule fires first, so a letter in its queue is a delete that
failed (the endpoint was there to delete); the backstop fires at least an hour later and, after a delete that
worked, finds no endpoint: its harmless failure lands in a queue of its own, and no alarm watches that one. The
alarm on the TTL's queue notifies an SNS topic (ttl_alarm_topic_arn), which ttlAlarmEmail subscribes to; `status`
reads both queues and counts only letters that name the endpoint still there.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import datetime, timedelta

import pulumi
import pulumi_aws as aws
import pulumi_command as command

from gemma4_t4 import catalog

from ..base import NotAProviderAnswer
from .access import scheduler_trust, service_role, step_environment
from .steps import created_at, ttl_passed

# Scheduler's universal target, in the aws partition (a region of another is refused at preview).
DELETE_ENDPOINT_TARGET = f"arn:{catalog.AWS_PARTITION}:scheduler:::aws-sdk:sagemaker:deleteEndpoint"
# Printed just before CreateEndpoint is called and kept in the state: the backstop's clock, so that an `up` stopped
# during the endpoint's wait (Ctrl-C, a crash) still leaves a schedule that deletes the endpoint. (The TTL's own
# clock is the endpoint's CreationTime, read on every run of the program: steps/created_at.py.)
CLOCK = "date -u +%Y-%m-%dT%H:%M:%SZ"
# EventBridge Scheduler's most: 185 retries over 24 h. A delete refused while the endpoint is
# Updating is tried again; what still fails lands in the dead-letter queue (kept 14 days).
TTL_RETRY = {"maximum_retry_attempts": 185, "maximum_event_age_in_seconds": 86400}
DLQ_RETENTION_S = 14 * 24 * 3600
# The backstop schedule fires at least this long after the first: an update holds the endpoint in Updating about
# as long as a create takes ([sagemaker-t4-article]: 13.3 minutes to InService), well within the hour. It is made before
# CreateEndpoint is called, from the time of that call plus the longest the provider waits for InService, so it
# is never earlier than the first schedule plus this.
TTL_BACKSTOP = timedelta(hours=1)
CREATE_WAIT = timedelta(seconds=catalog.SAGEMAKER_ENDPOINT_CREATE_TIMEOUT_S)
# The alarm on the TTL's dead letters: SQS publishes ApproximateNumberOfMessagesVisible to CloudWatch every minute
# for an active queue, and a queue a message was just sent to is active (Amazon SQS Developer Guide, "Available
# CloudWatch metrics for Amazon SQS"); one letter, at the largest in five minutes, is a failed delete.
DELETE_FAILED_NAMESPACE, DELETE_FAILED_METRIC = "AWS/SQS", "ApproximateNumberOfMessagesVisible"


def clock_time(printed: str | None, step: str) -> datetime:
    """The UTC time the clock step STEP printed (YYYY-MM-DDTHH:MM:SSZ, what `date -u` with CLOCK's format and
    steps/created_at.py always print); anything else is a mock's answer, refused with the mocks that answer as the
    steps do."""
    try:
        return datetime.fromisoformat(str(printed).strip().replace("Z", "+00:00"))
    except ValueError:
        raise NotAProviderAnswer(f"the clock step {step} printed {printed!r}, never a UTC time "
                                 "YYYY-MM-DDTHH:MM:SSZ as it always does") from None


def one_time_expression(at: str, after: timedelta, step: str = "clock") -> str:
    """Scheduler's at(...) for AFTER past the UTC time AT (YYYY-MM-DDTHH:MM:SSZ)."""
    when = clock_time(at, step) + after
    return f"at({when.strftime('%Y-%m-%dT%H:%M:%S')})"


def delete_target(endpoint_name: pulumi.Input[str], role: aws.iam.Role, dead_letters: aws.sqs.Queue
                  ) -> aws.scheduler.ScheduleTargetArgs:
    """Scheduler's universal target that deletes ENDPOINT_NAME as ROLE, retried, with the dead-letter queue."""
    return aws.scheduler.ScheduleTargetArgs(
        arn=DELETE_ENDPOINT_TARGET, role_arn=role.arn,
        input=pulumi.Output.json_dumps({"EndpointName": endpoint_name}),
        retry_policy=aws.scheduler.ScheduleTargetRetryPolicyArgs(**TTL_RETRY),
        dead_letter_config=aws.scheduler.ScheduleTargetDeadLetterConfigArgs(arn=dead_letters.arn))


@dataclass(frozen=True)
class TtlParts:
    """The TTL's parts made before CreateEndpoint is called; the schedule made after it shares them."""

    backstop: aws.scheduler.Schedule
    role: aws.iam.Role
    policy: pulumi.Resource
    dead_letters: aws.sqs.Queue
    backstop_dead_letters: aws.sqs.Queue
    alarm_topic: aws.sns.Topic


@dataclass(frozen=True)
class TtlOutputs:
    """What the component exports of its TTL."""

    deletes_at: pulumi.Output[str]
    dead_letter_queue_url: pulumi.Output[str]
    backstop_dead_letter_queue_url: pulumi.Output[str]
    alarm_topic_arn: pulumi.Output[str]


def dead_letter_queue(name: str, tags: dict[str, str], parent: pulumi.Resource) -> aws.sqs.Queue:
    return aws.sqs.Queue(name, message_retention_seconds=DLQ_RETENTION_S, sqs_managed_sse_enabled=True, tags=tags,
                         opts=pulumi.ResourceOptions(parent=parent))


def delete_failed_alarm(name: str, dead_letters: aws.sqs.Queue, email: str, tags: dict[str, str],
                        parent: pulumi.Resource) -> aws.sns.Topic:
    """The alarm on the TTL's dead letters, its topic, and (with EMAIL) the topic's e-mail subscription, which SNS
    holds as pending until the address confirms it (SNS Subscribe: "the endpoint owner must call
    ConfirmSubscription"; the AWS provider creates e-mail subscriptions and reports pending_confirmation,
    hashicorp/terraform-provider-aws#14923)."""
    child = pulumi.ResourceOptions(parent=parent)
    topic = aws.sns.Topic(f"{name}-ttl-alarm", tags=tags, opts=child)
    if email:
        aws.sns.TopicSubscription(f"{name}-ttl-alarm-email", topic=topic.arn, protocol="email", endpoint=email,
                                  opts=child)
    aws.cloudwatch.MetricAlarm(
        f"{name}-ttl-delete-failed",
        alarm_description=("EventBridge Scheduler gave up deleting the SageMaker endpoint at its endpointTtl: it "
                           f"still bills. `gemma4-t4 status -s {pulumi.get_stack()}` names it and the reason; "
                           "`pulumi destroy` deletes it."),
        namespace=DELETE_FAILED_NAMESPACE, metric_name=DELETE_FAILED_METRIC,
        dimensions={"QueueName": dead_letters.name},
        statistic="Maximum", period=300, evaluation_periods=1, threshold=1,
        comparison_operator="GreaterThanOrEqualToThreshold", treat_missing_data="notBreaching",
        alarm_actions=[topic.arn], tags=tags, opts=child)
    return topic


def arm_before_create(name: str, ttl: timedelta, endpoint_name: pulumi.Output[str], region: str,
                      account: pulumi.Output[str], config: aws.sagemaker.EndpointConfiguration,
                      tags: dict[str, str], autoscaling: bool, alarm_email: str, parent: pulumi.Resource) -> TtlParts:
    """What deletes the endpoint, made before CreateEndpoint is called: the dead-letter queues and the alarm, the
    role that may delete only this endpoint (by its name, known from the configuration's), and the backstop
    schedule, from a clock read just before the create: that clock plus the longest the provider waits for
    InService, the TTL and the backstop's hour. An `up` stopped during the endpoint's wait (Ctrl-C, a crash, a lost
    laptop) leaves this schedule behind, and it deletes the endpoint.

    Its clock is read once per endpoint name (the clock's trigger), so the backstop is armed when a configuration
    first gets its endpoint. A later endpoint under the same name (after the TTL deleted the first: `pulumi
    refresh`, `pulumi up`) cannot be seen before it exists and gets no new backstop; its first schedule is
    re-armed from its own CreationTime on every `up` (delete_after)."""
    dead_letters = dead_letter_queue(f"{name}-ttl-dlq", tags, parent)
    backstop_dead_letters = dead_letter_queue(f"{name}-ttl-backstop-dlq", tags, parent)
    topic = delete_failed_alarm(name, dead_letters, alarm_email, tags, parent)
    # The aws partition's ARN: a region of another partition is refused at preview (settings' region).
    endpoint_arn = pulumi.Output.all(endpoint_name, account).apply(
        lambda found: f"arn:{catalog.AWS_PARTITION}:sagemaker:{region}:{found[1]}:endpoint/{found[0].lower()}")
    statements: list[dict[str, pulumi.Input]] = [
        {"Effect": "Allow", "Action": "sagemaker:DeleteEndpoint", "Resource": endpoint_arn},
        {"Effect": "Allow", "Action": "sqs:SendMessage", "Resource": [dead_letters.arn, backstop_dead_letters.arn]}]
    if autoscaling:
        # Deleting an autoscaled endpoint deregisters its target with the caller's rights, and fails
        # without them. AWS's page asks for the action, not for a target's ARN (SageMaker developer guide,
        # "Delete endpoints configured for auto scaling", endpoint-delete-with-scaling.html, read
        # 2026-12-04): the check is made by Application Auto Scaling on SageMaker's behalf. It lets the
        # role stop autoscaling, nothing more; DeleteEndpoint stays this endpoint's alone.
        statements.append({"Effect": "Allow", "Action": "application-autoscaling:DeregisterScalableTarget",
                           "Resource": "*"})
    role, policy = service_role(f"{name}-ttl", "scheduler.amazonaws.com", statements, tags, parent,
                                scheduler_trust(region, account))
    requested = command.local.Command(f"{name}-endpoint-requested-at", create=CLOCK, triggers=[endpoint_name],
                                      opts=pulumi.ResourceOptions(parent=parent, depends_on=[config]))
    # The backstop: the same delete again, later. A delete refused while the endpoint is Updating is a 4xx,
    # and whether Scheduler retries a universal target's 4xx is undocumented; if it does not, the first
    # attempt goes to the TTL's dead-letter queue (and its alarm) and the backstop deletes the endpoint. After a delete
    # that worked, the backstop's finds no endpoint and lands in its own queue, which no alarm watches.
    backstop = aws.scheduler.Schedule(
        f"{name}-ttl-backstop",
        schedule_expression=requested.stdout.apply(lambda at: one_time_expression(
            at, CREATE_WAIT + ttl + TTL_BACKSTOP, f"{name}-endpoint-requested-at")),
        schedule_expression_timezone="UTC",
        flexible_time_window=aws.scheduler.ScheduleFlexibleTimeWindowArgs(mode="OFF"),
        target=delete_target(endpoint_name, role, backstop_dead_letters),
        opts=pulumi.ResourceOptions(parent=parent, depends_on=[policy]))
    return TtlParts(backstop, role, policy, dead_letters, backstop_dead_letters, topic)


def delete_after(name: str, ttl: timedelta, endpoint: aws.sagemaker.Endpoint, parts: TtlParts, region: str,
                 environment: pulumi.Output[dict[str, str]], parent: pulumi.Resource) -> TtlOutputs:
    """EventBridge Scheduler deletes the endpoint ``ttl`` after its creation (SageMaker's CreationTime: the
    ~13 minutes of creating count), with the role that can do only that, retries, and the dead-letter queue for
    a delete that kept failing: the deadline the backstop (made before the create) gave is tightened to it.

    The deadline is the endpoint's own: its CreationTime, read on every `pulumi up` and preview once the
    endpoint exists (steps/created_at.py, a local run invoke). State cannot hold it: after the TTL fired,
    `pulumi refresh` drops the endpoint and `pulumi up` creates a new one under the same name, and an endpoint
    adopted after a Ctrl-C (`pulumi refresh --import-pending-creates`) was created long before the `up` that
    records it; either gets the deadline its own creation gives. After the TTL fired, an `up` without a refresh
    stops at that step with the line that says to refresh (the state still lists the endpoint SageMaker no
    longer has); `pulumi destroy` needs none. A deadline that moves into the past (a lowered endpointTtl)
    deletes the endpoint during that `up` (steps/ttl_passed.py): whether Scheduler ever fires a one-time
    schedule set in the past is not documented."""
    # The request waits for the endpoint's ARN: until the endpoint exists in this deployment (a preview of its
    # creation), the invoke's input is unknown and so is its answer (pulumi/runtime/invoke.py), never an error.
    request = pulumi.Output.all(endpoint.name, endpoint.arn).apply(
        lambda found: created_at.CreatedAtRequest(endpoint_name=found[0]))
    # It runs on every preview and `up`: only its stderr (a failure's line) is logged, not the time it prints.
    created = command.local.run_output(command=created_at.command(),
                                       environment=step_environment(environment, region, request),
                                       logging=command.local.Logging.STDERR,
                                       opts=pulumi.InvokeOutputOptions(parent=parent))
    deletes_at = created.stdout.apply(lambda at: (clock_time(at, created_at.NAME) + ttl)
                                      .strftime(created_at.TIME_FORMAT))
    passed = command.local.Command(
        f"{name}-ttl-passed", create=ttl_passed.command(),
        environment=step_environment(environment, region, pulumi.Output.all(endpoint.name, deletes_at).apply(
            lambda found: ttl_passed.TtlRequest(endpoint_name=found[0], deletes_at=found[1]))),
        triggers=[deletes_at],
        opts=pulumi.ResourceOptions(parent=parent, depends_on=[endpoint]))
    # This schedule and its right to delete follow the endpoint resource, not the name made before it: while a
    # change's new endpoint is created, they still delete the old one at its deadline (if the new one fails,
    # the old one serves on with its TTL); the backstop and the first policy already name the new one.
    in_service = aws.iam.RolePolicy(f"{name}-ttl-in-service-policy", role=parts.role.id,
                                    policy=pulumi.Output.json_dumps({"Version": "2012-10-17", "Statement": [
                                        {"Effect": "Allow", "Action": "sagemaker:DeleteEndpoint",
                                         "Resource": endpoint.arn}]}),
                                    opts=pulumi.ResourceOptions(parent=parent))
    # A deadline already past is acted on before the schedule is moved to it.
    aws.scheduler.Schedule(
        f"{name}-ttl",
        schedule_expression=deletes_at.apply(functools.partial(one_time_expression, after=timedelta(0))),
        schedule_expression_timezone="UTC",
        flexible_time_window=aws.scheduler.ScheduleFlexibleTimeWindowArgs(mode="OFF"),
        target=delete_target(endpoint.name, parts.role, parts.dead_letters),
        opts=pulumi.ResourceOptions(parent=parent, depends_on=[parts.policy, in_service, passed]),
    )
    return TtlOutputs(deletes_at, parts.dead_letters.url, parts.backstop_dead_letters.url, parts.alarm_topic.arn)
