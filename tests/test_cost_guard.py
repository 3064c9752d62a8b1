"""The cost guard on the graph: GCE run-time limit, SPOT and idle stop; the SageMaker TTL."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
import yaml
from conftest import REPO

from gemma4_t4.components import sagemaker
from gemma4_t4.components.config.schema import parse_ttl
from gemma4_t4.components.sagemaker import CLOCK

INSTANCE = "gcp:compute/instance:Instance"
SCHEDULE = "aws:scheduler/schedule:Schedule"

pytestmark = pytest.mark.components

# --- GCE cost guard on the graph ---------------------------------------------------------------------


def _runcmd(plan):
    return yaml.safe_load(plan.one(INSTANCE).inputs["metadata"]["user-data"])["runcmd"]


def test_cost_guard_is_off_by_default(run_stack):
    plan = run_stack("gce-t4")
    scheduling = plan.one(INSTANCE).inputs["scheduling"]
    assert "maxRunDuration" not in scheduling and "instanceTerminationAction" not in scheduling
    assert "gemma4-t4-idle-stop.timer" not in json.dumps(_runcmd(plan))


def test_max_run_hours_stops_the_vm(run_stack):
    scheduling = run_stack("gce-t4", "maxRunHours=8").one(INSTANCE).inputs["scheduling"]
    assert scheduling["maxRunDuration"] == {"seconds": 28800.0}
    assert scheduling["instanceTerminationAction"] == "STOP"
    assert scheduling["provisioningModel"] == "STANDARD" and scheduling["automaticRestart"] is True


def test_spot_with_an_explicit_action(run_stack):
    scheduling = run_stack("gce-t4", "spot=true", "maxRunHours=4", "terminationAction=DELETE").one(INSTANCE) \
        .inputs["scheduling"]
    assert scheduling["provisioningModel"] == "SPOT" and scheduling["preemptible"] is True
    assert scheduling["automaticRestart"] is False and scheduling["instanceTerminationAction"] == "DELETE"


def test_a_spot_vm_costs_its_machine_and_t4_at_the_spot_prices(run_stack):
    """The disks and the address bill the same on a Spot VM; the machine and the GPU at their Spot SKUs."""
    from gemma4_t4 import catalog
    from gemma4_t4.core import plan as plan_mod

    prices = catalog.GCE_PRICES["us-west2"]  # the stack's zone us-west2-b
    standard, spot = run_stack("gce-t4"), run_stack("gce-t4", "spot=true")
    saved = sum(prices[item].usd_per_hour - prices[catalog.spot_item(item)].usd_per_hour
                for item in ("machine:n1-standard-2", "gpu:nvidia-tesla-t4"))
    assert spot.outputs["cost_per_hour_usd"] == pytest.approx(standard.outputs["cost_per_hour_usd"] - saved, abs=1e-4)
    assert "Spot list prices" in plan_mod.cost_line(spot) and "Spot" not in plan_mod.cost_line(standard)


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


@pytest.mark.parametrize("overrides,key", [
    (("idleStopMinutes=4",), "gemma4-t4:idleStopMinutes"),
    (("idleStopMinutes=-1",), "gemma4-t4:idleStopMinutes"),
    (("spot=true", "maxRunHours=2"), "gemma4-t4:terminationAction"),
    (("terminationAction=HIBERNATE",), "gemma4-t4:terminationAction"),
    (("maxRunHours=-3",), "gemma4-t4:maxRunHours"),
])
def test_bad_cost_guard_is_refused(refused_stack, overrides, key):
    error, partial = refused_stack("gce-t4", *overrides)
    assert error.key == key and "fix: pulumi config set" in str(error) and partial.resources == []


# --- SageMaker time-to-live (the schedule against moto: test_sagemaker_ttl.py) -------------------------


def test_no_schedule_unless_a_ttl_is_set(run_stack):
    plan = run_stack("sagemaker-t4")
    assert plan.find(SCHEDULE) == [] and plan.find("aws:sqs/queue:Queue") == []
    assert "endpoint_deletes_at" not in plan.outputs


def test_ttl_counts_from_the_clock_read_when_the_endpoint_is_in_service(run_stack):
    plan = run_stack("sagemaker-t4", "endpointTtl=8h30m")
    clock = plan.one("command:local:Command", "gemma4-t4-in-service-at")
    endpoint = plan.one("aws:sagemaker/endpoint:Endpoint")
    assert clock.inputs["create"] == CLOCK and clock.inputs["triggers"] == [endpoint.state["name"]]
    assert "aws:sagemaker/endpoint:Endpoint::gemma4-t4-endpoint" in clock.options["dependsOn"]
    # The mocks' clock says 2030-01-01T00:00:00Z.
    schedule = plan.one(SCHEDULE, "gemma4-t4-ttl").inputs
    assert schedule["scheduleExpression"] == "at(2030-01-01T08:30:00)"
    assert schedule["scheduleExpressionTimezone"] == "UTC" and schedule["flexibleTimeWindow"] == {"mode": "OFF"}
    assert plan.outputs["endpoint_deletes_at"] == "2030-01-01T08:30:00Z"
    # The backstop: the same delete later, for a first one refused while the endpoint was busy. It is made before
    # CreateEndpoint from the clock read then, plus the provider's 60-minute wait at most, the TTL and an hour.
    backstop = plan.one(SCHEDULE, "gemma4-t4-ttl-backstop").inputs
    assert backstop["scheduleExpression"] == "at(2030-01-01T10:30:00)"
    assert backstop["target"] == schedule["target"] and backstop["flexibleTimeWindow"] == {"mode": "OFF"}


def test_ttl_retries_and_keeps_what_failed_in_a_dead_letter_queue(run_stack):
    plan = run_stack("sagemaker-t4", "endpointTtl=2h")
    target = plan.one(SCHEDULE, "gemma4-t4-ttl").inputs["target"]
    queue = plan.one("aws:sqs/queue:Queue")
    assert target["retryPolicy"] == {"maximumRetryAttempts": 185.0, "maximumEventAgeInSeconds": 86400.0}
    assert target["deadLetterConfig"] == {"arn": queue.state["arn"]}
    assert queue.inputs["messageRetentionSeconds"] == 14 * 24 * 3600 and queue.inputs["sqsManagedSseEnabled"] is True
    assert plan.outputs["ttl_dead_letter_queue_url"] == queue.state["url"]


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
        {"Effect": "Allow", "Action": "sqs:SendMessage", "Resource": plan.one("aws:sqs/queue:Queue").state["arn"]}]
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

    monkeypatch.setattr(sagemaker, "datetime", Later)
    assert run_stack("sagemaker-t4", "endpointTtl=8h").one(SCHEDULE, "gemma4-t4-ttl").inputs["scheduleExpression"] \
        == first["scheduleExpression"]


@pytest.mark.parametrize("raw,expected", [
    ("", None), ("0", None), ("15m", timedelta(minutes=15)), ("8h", timedelta(hours=8)),
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
