"""The cost guard on the graph: GCE run-time limit, SPOT and idle stop; the SageMaker TTL."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime, timedelta

import pytest
import yaml
from conftest import REPO

from gemma4_t4 import catalog, clouds
from gemma4_t4.clouds.sagemaker.standins import AwsWorld
from gemma4_t4.components.config.schema import parse_ttl
from gemma4_t4.components.sagemaker import ttl
from gemma4_t4.components.sagemaker.steps import created_at
from gemma4_t4.components.sagemaker.ttl import CLOCK
from gemma4_t4.core.plan_lines import cost_line, guard_lines

INSTANCE = "gcp:compute/instance:Instance"
SCHEDULE = "aws:scheduler/schedule:Schedule"
QUEUE = "aws:sqs/queue:Queue"

# --- GCE cost guard on the graph ---------------------------------------------------------------------


def _runcmd(plan):
    return yaml.safe_load(plan.one(INSTANCE).inputs["metadata"]["user-data"])["runcmd"]


def _guest_env(plan) -> str:
    return next(f["content"] for f in yaml.safe_load(plan.one(INSTANCE).inputs["metadata"]["user-data"])
                ["write_files"] if f["path"] == "/etc/gemma4-t4/guest.env")


def test_cost_guard_is_on_by_default(run_stack):
    """The stack as shipped (Pulumi.yaml's defaults and Pulumi.gce-t4.yaml) stops a forgotten VM: GCE after a day
    of running, the guest after an hour idle or an hour into a boot that never became healthy."""
    plan = run_stack("gce-t4")
    scheduling = plan.one(INSTANCE).inputs["scheduling"]
    assert scheduling["maxRunDuration"] == {"seconds": float(catalog.DEFAULT_MAX_RUN_HOURS * 3600)}
    assert scheduling["instanceTerminationAction"] == "STOP" and scheduling["provisioningModel"] == "STANDARD"
    enable = next(c for c in _runcmd(plan) if c[:2] == ["systemctl", "enable"])
    start = next(c for c in _runcmd(plan) if c[:2] == ["systemctl", "start"])
    assert enable[-1] == start[-1] == "gemma4-t4-idle-stop.timer"
    assert f"IDLE_STOP_MINUTES={catalog.DEFAULT_IDLE_STOP_MINUTES}\n" in _guest_env(plan)
    assert f"HEALTH_BOUND_MINUTES={catalog.HEALTH_BOUND_MINUTES}\n" in \
        plan.one(INSTANCE).inputs["metadata"]["gemma4-t4-serving"]
    assert [(g["key"], g["value"], g["on"]) for g in plan.outputs["cost_guards"]] == [
        ("idleStopMinutes", "60", True), ("maxRunHours", "24", True)]
    lines = guard_lines(plan)
    assert lines[1] == ("  idleStopMinutes 60: the VM stops itself after 60 min without a request, and when a boot "
                        f"whose vLLM never answered makes no progress for {catalog.HEALTH_STALL_MINUTES} min or runs "
                        f"past {catalog.HEALTH_BOUND_MINUTES} min")
    assert lines[2] == "  maxRunHours 24: GCE stops the VM after 24 h running, whatever its guest does"


def test_a_guard_turned_off_is_listed_with_its_cost_per_day_and_warned_of(run_stack, caplog):
    caplog.set_level(logging.WARNING)
    run_stack("gce-t4")
    assert not [r for r in caplog.records if "cost guard" in r.getMessage()], "no warning while every guard is on"
    plan = run_stack("gce-t4", "idleStopMinutes=0", "maxRunHours=0")
    scheduling = plan.one(INSTANCE).inputs["scheduling"]
    assert "maxRunDuration" not in scheduling and "instanceTerminationAction" not in scheduling
    # The timer stays (so that turning the guard on again lands on the running VM); its check does nothing at 0
    # (cloudinit/scripts/idle_stop.py), tested in tests/guest/test_idle_stop.py.
    assert "IDLE_STOP_MINUTES=0\n" in plan.one(INSTANCE).inputs["metadata"]["user-data"]
    per_day = round(plan.outputs["cost_per_hour_usd"] * 24, 2)
    assert per_day == 14.16  # n1-standard-2 + one T4 + address + disks in us-west2 (catalog), x 24
    assert [(g["key"], g["on"], g["off_usd_per_day"]) for g in plan.outputs["cost_guards"]] == [
        ("idleStopMinutes", False, per_day), ("maxRunHours", False, per_day)]
    assert "  idleStopMinutes OFF: nothing stops a VM left idle, or one whose vLLM never becomes healthy; can bill " \
        "$14.16/day" in guard_lines(plan)
    warnings = [r.getMessage() for r in caplog.records if "cost guard" in r.getMessage()]
    assert warnings == [
        "cost guard idleStopMinutes is off: nothing stops a VM left idle, or one whose vLLM never becomes healthy; "
        "that can bill up to $14.16/day (catalog list price x 24 h)",
        "cost guard maxRunHours is off: nothing bounds how long the VM runs (a client that keeps it busy, a guest "
        "whose idle stop cannot run); that can bill up to $14.16/day (catalog list price x 24 h)"]


def test_the_stack_files_turn_no_guard_off():
    """Pulumi.gce-t4.yaml and Pulumi.sagemaker-t4.yaml leave every guard at Pulumi.yaml's default, which is on."""
    project = yaml.safe_load((REPO / "Pulumi.yaml").read_text())["config"]
    for key in ("idleStopMinutes", "maxRunHours", "endpointTtl"):
        assert str(project[key]["default"]) not in ("0", "", "off"), key
        for stack in ("gce-t4", "sagemaker-t4"):
            config = yaml.safe_load((REPO / f"Pulumi.{stack}.yaml").read_text())["config"] or {}
            assert f"gemma4-t4:{key}" not in config, f"Pulumi.{stack}.yaml sets {key}"


def test_max_run_hours_stops_the_vm(run_stack):
    scheduling = run_stack("gce-t4", "maxRunHours=8").one(INSTANCE).inputs["scheduling"]
    assert scheduling["maxRunDuration"] == {"seconds": 28800.0}
    assert scheduling["instanceTerminationAction"] == "STOP"
    assert scheduling["provisioningModel"] == "STANDARD" and scheduling["automaticRestart"] is True


def test_spot_with_the_default_run_limit_stops(run_stack):
    """SPOT with maxRunHours (the default's) needs no explicit action: STOP, the disks stay."""
    scheduling = run_stack("gce-t4", "spot=true").one(INSTANCE).inputs["scheduling"]
    assert scheduling["provisioningModel"] == "SPOT" and scheduling["instanceTerminationAction"] == "STOP"
    assert scheduling["maxRunDuration"] == {"seconds": 86400.0}


def test_spot_with_an_explicit_action(run_stack):
    scheduling = run_stack("gce-t4", "spot=true", "maxRunHours=4", "terminationAction=DELETE").one(INSTANCE) \
        .inputs["scheduling"]
    assert scheduling["provisioningModel"] == "SPOT" and scheduling["preemptible"] is True
    assert scheduling["automaticRestart"] is False and scheduling["instanceTerminationAction"] == "DELETE"


def test_a_spot_vm_costs_its_machine_and_t4_at_the_spot_prices(run_stack):
    """The disks and the address bill the same on a Spot VM; the machine and the GPU at their Spot SKUs."""
    from gemma4_t4 import catalog

    prices = catalog.GCE_PRICES["us-west2"]  # the stack's zone us-west2-b
    standard, spot = run_stack("gce-t4"), run_stack("gce-t4", "spot=true")
    saved = sum(prices[item].usd_per_hour - prices[catalog.spot_item(item)].usd_per_hour
                for item in ("machine:n1-standard-2", "gpu:nvidia-tesla-t4"))
    assert spot.outputs["cost_per_hour_usd"] == pytest.approx(standard.outputs["cost_per_hour_usd"] - saved, abs=1e-4)
    assert clouds.plan_cloud(spot).is_spot(spot) and not clouds.plan_cloud(standard).is_spot(standard)
    assert "Spot list prices" in cost_line(spot, spot=True)
    assert "Spot" not in cost_line(standard, spot=False)


def test_spot_with_two_t4s_counts_both_at_the_spot_price(run_stack):
    from gemma4_t4 import catalog

    prices = catalog.GCE_PRICES["us-west2"]
    one = run_stack("gce-t4", "spot=true").outputs["cost_per_hour_usd"]
    two = run_stack("gce-t4", "spot=true", "tensorParallelSize=2").outputs["cost_per_hour_usd"]
    more = (prices["machine:n1-standard-4:spot"].usd_per_hour - prices["machine:n1-standard-2:spot"].usd_per_hour
            + prices["gpu:nvidia-tesla-t4:spot"].usd_per_hour)
    assert two == pytest.approx(one + more, abs=1e-4)


def test_idle_stop_enables_and_starts_the_timer_and_tells_the_guest(run_stack):
    plan = run_stack("gce-t4", "idleStopMinutes=30")
    enable = next(c for c in _runcmd(plan) if c[:2] == ["systemctl", "enable"])
    assert enable[-1] == "gemma4-t4-idle-stop.timer" and "gemma4-vllm.service" in enable
    # Started on the first boot too: a driver that loads without a reboot gives no later boot.
    start = next(c for c in _runcmd(plan) if c[:2] == ["systemctl", "start"])
    assert start[-1] == "gemma4-t4-idle-stop.timer" and "gemma4-vllm.service" in start
    guest_env = next(f["content"] for f in yaml.safe_load(plan.one(INSTANCE).inputs["metadata"]["user-data"])
                     ["write_files"] if f["path"] == "/etc/gemma4-t4/guest.env")
    assert "IDLE_STOP_MINUTES=30\n" in guest_env
    # The port is a serving value: the idle stop reads vLLM's /metrics address from vllm.env.
    assert "METRICS_URL=http://127.0.0.1:8000/metrics\n" in plan.one(INSTANCE).inputs["metadata"]["gemma4-t4-serving"]
    assert "EnvironmentFile=/etc/gemma4-t4/vllm.env" in (REPO / "cloudinit" / "units" /
                                                         "gemma4-t4-idle-stop.service").read_text()


def test_the_readme_states_the_guards_their_defaults_and_cost_per_day(run_stack):
    readme = (REPO / "README.md").read_text()
    for stack in ("gce-t4", "sagemaker-t4"):
        per_day = run_stack(stack).outputs["cost_per_hour_usd"] * catalog.HOURS_PER_DAY
        assert f"${per_day:,.2f} on `{stack}`" in readme, "the README's cost per day follows the catalog's price"
    for key, default, off in (("idleStopMinutes", catalog.DEFAULT_IDLE_STOP_MINUTES, "0"),
                              ("maxRunHours", catalog.DEFAULT_MAX_RUN_HOURS, "0"),
                              ("endpointTtl", catalog.DEFAULT_ENDPOINT_TTL, "off")):
        assert f"`{key}: {default}`" in readme and f"pulumi config set gemma4-t4:{key} {off}" in readme


@pytest.mark.parametrize("overrides,key", [
    (("idleStopMinutes=4",), "gemma4-t4:idleStopMinutes"),
    (("idleStopMinutes=-1",), "gemma4-t4:idleStopMinutes"),
    (("terminationAction=HIBERNATE",), "gemma4-t4:terminationAction"),
    (("maxRunHours=-3",), "gemma4-t4:maxRunHours"),
])
def test_bad_cost_guard_is_refused(refused_stack, overrides, key):
    error, partial = refused_stack("gce-t4", *overrides)
    assert error.key == key and "fix: pulumi config set" in str(error) and partial.resources == []


# --- SageMaker time-to-live (the schedule against moto: test_sagemaker_ttl.py) -------------------------


def test_the_ttl_is_a_day_by_default(run_stack, caplog):
    caplog.set_level(logging.WARNING)
    plan = run_stack("sagemaker-t4")
    assert plan.one(SCHEDULE, "gemma4-t4-ttl").inputs["scheduleExpression"] == "at(2030-01-02T00:00:00)"
    assert plan.outputs["endpoint_deletes_at"] == "2030-01-02T00:00:00Z"
    assert plan.outputs["cost_guards"] == [
        {"key": "endpointTtl", "value": "24h", "on": True, "off_usd_per_day": None,
         "effect": "EventBridge Scheduler deletes the endpoint 24h after its creation"}]
    assert not [r for r in caplog.records if "cost guard" in r.getMessage()]


@pytest.mark.parametrize("off", ["off", "OFF", "", "0"])
def test_no_schedule_when_the_ttl_is_off(run_stack, caplog, off):
    caplog.set_level(logging.WARNING)
    plan = run_stack("sagemaker-t4", f"endpointTtl={off}", "maxInstanceCount=3")
    assert plan.find(SCHEDULE) == [] and plan.find(QUEUE) == []
    assert "endpoint_deletes_at" not in plan.outputs
    # Off, at the most instances autoscaling may run: 3 x ml.g4dn.xlarge at $0.736/h (catalog, us-east-2) x 24.
    guard, = plan.outputs["cost_guards"]
    assert guard["on"] is False and guard["value"] == "off" and guard["off_usd_per_day"] == 52.99
    assert guard_lines(plan)[1] == ("  endpointTtl OFF: nothing deletes the endpoint: it bills until `pulumi destroy`; "
                                    "can bill $52.99/day")
    assert [r.getMessage() for r in caplog.records if "cost guard" in r.getMessage()] == [
        "cost guard endpointTtl is off: nothing deletes the endpoint: it bills until `pulumi destroy`; that can bill "
        "up to $52.99/day (catalog list price x 24 h)"]


def test_ttl_counts_from_the_endpoints_creation_time(run_stack):
    """The deadline is the endpoint's own CreationTime, which the creation-time step reads on every run of the
    program once the endpoint exists (a local run, no clock kept in the state), plus the TTL."""
    asked: list[dict] = []
    world = AwsWorld()
    answer = world.run_local_command
    world.run_local_command = lambda args: asked.append(args) or answer(args)  # type: ignore[method-assign]
    plan = run_stack("sagemaker-t4", "endpointTtl=8h30m", world={"sagemaker": world})
    endpoint = plan.one("aws:sagemaker/endpoint:Endpoint")
    assert not plan.find("command:local:Command", "gemma4-t4-in-service-at")
    (run,) = asked
    assert run["command"] == created_at.command()
    assert created_at.CreatedAtRequest.from_env(run["environment"]).endpoint_name == endpoint.state["name"]
    assert run["environment"]["AWS_REGION"] == "us-east-2"
    # The offline world's endpoint was created at the mocks' now, 2030-01-01T00:00:00Z.
    schedule = plan.one(SCHEDULE, "gemma4-t4-ttl").inputs
    assert schedule["scheduleExpression"] == "at(2030-01-01T08:30:00)"
    assert schedule["scheduleExpressionTimezone"] == "UTC" and schedule["flexibleTimeWindow"] == {"mode": "OFF"}
    assert plan.outputs["endpoint_deletes_at"] == "2030-01-01T08:30:00Z"
    # The backstop: the same delete later, for a first one refused while the endpoint was busy. It is made before
    # CreateEndpoint from the clock read then, plus the provider's 60-minute wait at most, the TTL and an hour.
    requested = plan.one("command:local:Command", "gemma4-t4-endpoint-requested-at")
    assert requested.inputs["create"] == CLOCK and requested.inputs["triggers"] == [endpoint.state["name"]]
    backstop = plan.one(SCHEDULE, "gemma4-t4-ttl-backstop").inputs
    assert backstop["scheduleExpression"] == "at(2030-01-01T10:30:00)"
    # The same delete, but a failure of its own lands in a queue of its own (see the dead-letter test below).
    assert {**backstop["target"], "deadLetterConfig": None} == {**schedule["target"], "deadLetterConfig": None}
    assert backstop["flexibleTimeWindow"] == {"mode": "OFF"}
    # An endpoint created at another time has its own deadline; the backstop's clock is not its.
    earlier = AwsWorld(endpoints={endpoint.state["name"]: "2029-12-31T23:46:40Z"})
    plan = run_stack("sagemaker-t4", "endpointTtl=8h30m", world={"sagemaker": earlier})
    assert plan.outputs["endpoint_deletes_at"] == "2030-01-01T08:16:40Z"
    assert plan.one(SCHEDULE, "gemma4-t4-ttl").inputs["scheduleExpression"] == "at(2030-01-01T08:16:40)"
    assert plan.one(SCHEDULE, "gemma4-t4-ttl-backstop").inputs["scheduleExpression"] == "at(2030-01-01T10:30:00)"


def test_ttl_retries_and_keeps_what_failed_in_a_dead_letter_queue(run_stack):
    plan = run_stack("sagemaker-t4", "endpointTtl=2h")
    target = plan.one(SCHEDULE, "gemma4-t4-ttl").inputs["target"]
    queue = plan.one(QUEUE, "gemma4-t4-ttl-dlq")
    assert target["retryPolicy"] == {"maximumRetryAttempts": 185.0, "maximumEventAgeInSeconds": 86400.0}
    assert target["deadLetterConfig"] == {"arn": queue.state["arn"]}
    assert queue.inputs["messageRetentionSeconds"] == 14 * 24 * 3600 and queue.inputs["sqsManagedSseEnabled"] is True
    assert plan.outputs["ttl_dead_letter_queue_url"] == queue.state["url"]


def test_an_alarm_watches_the_ttls_dead_letters_and_not_the_backstops(run_stack):
    """A letter in the TTL's queue is a delete that failed while the endpoint was there; the backstop's harmless
    failure (it fires after a delete that worked) lands in a queue of its own, which no alarm watches."""
    plan = run_stack("sagemaker-t4", "endpointTtl=2h", "ttlAlarmEmail=ops@example.com")
    ttl_queue, backstop_queue = plan.one(QUEUE, "gemma4-t4-ttl-dlq"), plan.one(QUEUE, "gemma4-t4-ttl-backstop-dlq")
    backstop = plan.one(SCHEDULE, "gemma4-t4-ttl-backstop").inputs["target"]
    assert backstop["deadLetterConfig"] == {"arn": backstop_queue.state["arn"]}
    (alarm,) = [a.inputs for a in plan.find("aws:cloudwatch/metricAlarm:MetricAlarm")]
    topic = plan.one("aws:sns/topic:Topic", "gemma4-t4-ttl-alarm")
    assert alarm["dimensions"] == {"QueueName": ttl_queue.state["name"]} and alarm["alarmActions"] == [
        topic.state["arn"]]
    assert (alarm["namespace"], alarm["metricName"], alarm["threshold"], alarm["comparisonOperator"]) == (
        "AWS/SQS", "ApproximateNumberOfMessagesVisible", 1.0, "GreaterThanOrEqualToThreshold")
    subscription = plan.one("aws:sns/topicSubscription:TopicSubscription").inputs
    assert subscription == {**subscription, "topic": topic.state["arn"], "protocol": "email",
                            "endpoint": "ops@example.com"}
    assert "`gemma4-t4 status -s sagemaker-t4`" in alarm["alarmDescription"], "a line that runs as printed"
    assert plan.outputs["ttl_alarm_topic_arn"] == topic.state["arn"]
    assert plan.outputs["ttl_backstop_dead_letter_queue_url"] == backstop_queue.state["url"]
    # Without an address, the topic alone (for the user's own subscription).
    assert not run_stack("sagemaker-t4", "endpointTtl=2h").find("aws:sns/topicSubscription:TopicSubscription")


def test_ttl_deletes_the_endpoint_with_a_role_that_can_do_only_that(run_stack):
    plan = run_stack("sagemaker-t4", "endpointTtl=1d")
    target = plan.one(SCHEDULE, "gemma4-t4-ttl").inputs["target"]
    assert target["arn"] == "arn:aws:scheduler:::aws-sdk:sagemaker:deleteEndpoint"
    endpoint = plan.one("aws:sagemaker/endpoint:Endpoint").state
    assert json.loads(target["input"]) == {"EndpointName": endpoint["name"]}
    policy = json.loads(plan.find("aws:iam/rolePolicy:RolePolicy", "gemma4-t4-ttl-policy")[0].inputs["policy"])
    # The endpoint's ARN by its name (the role exists before the endpoint does): this account, this region.
    assert policy["Statement"] == [
        {"Effect": "Allow", "Action": "sagemaker:DeleteEndpoint", "Resource": endpoint["arn"]},
        {"Effect": "Allow", "Action": "sqs:SendMessage", "Resource": [plan.one(QUEUE, "gemma4-t4-ttl-dlq").state["arn"],
                                                                      plan.one(QUEUE, "gemma4-t4-ttl-backstop-dlq")
                                                                      .state["arn"]]}]
    trust = json.loads(plan.find("aws:iam/role:Role", "gemma4-t4-ttl")[0].inputs["assumeRolePolicy"])
    assert trust["Statement"][0]["Principal"] == {"Service": "scheduler.amazonaws.com"}


def test_the_plan_does_not_depend_on_when_it_runs(run_stack, monkeypatch):
    """The old TTL was a time checked against the plan's clock: once past, every `pulumi up`
    failed. Now nothing in the program reads the time: a year later the same stack plans the same."""
    first = run_stack("sagemaker-t4", "endpointTtl=8h").one(SCHEDULE, "gemma4-t4-ttl").inputs

    class Later(datetime):
        @classmethod
        def now(cls, tz=None):
            return datetime(2031, 6, 1, tzinfo=tz or UTC)

    monkeypatch.setattr(ttl, "datetime", Later)
    assert run_stack("sagemaker-t4", "endpointTtl=8h").one(SCHEDULE, "gemma4-t4-ttl").inputs["scheduleExpression"] \
        == first["scheduleExpression"]


@pytest.mark.parametrize("raw,expected", [
    ("", None), ("0", None), ("off", None), (" Off ", None), ("15m", timedelta(minutes=15)), ("8h", timedelta(hours=8)),
    ("1d12h", timedelta(days=1, hours=12)), ("2h30m", timedelta(hours=2, minutes=30)), (" 90m ", timedelta(minutes=90)),
])
def test_ttl_durations(raw, expected):
    assert parse_ttl(raw) == expected


@pytest.mark.parametrize("ttl,problem", [
    ("2030-01-01T00:00:00Z", "is a point in time; endpointTtl is a duration"),
    ("tomorrow", "not a duration like 8h"),
    ("8 hours", "not a duration like 8h"),
    ("-1h", "not a duration like 8h"),
    ("10m", "less than 15 min"),
])
def test_bad_ttl_is_refused(refused_stack, ttl, problem):
    error, partial = refused_stack("sagemaker-t4", f"endpointTtl={ttl}")
    assert error.key == "gemma4-t4:endpointTtl" and problem in str(error) and partial.resources == []
    assert "pulumi config set gemma4-t4:endpointTtl 8h" in str(error)
