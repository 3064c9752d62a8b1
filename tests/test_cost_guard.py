"""Preflight decisions on recorded API responses, the cost guard on the graph, the idle logic."""

from __future__ import annotations

import importlib.util
import json
from datetime import datetime, timezone

import pytest
import yaml
from conftest import REPO

from components.sagemaker import SageMakerT4Settings
from gemma4_t4 import preflight

INSTANCE = "gcp:compute/instance:Instance"
SCHEDULE = "aws:scheduler/schedule:Schedule"

# --- preflight on recorded responses (shapes as compute_v1 to_dict / boto3 return them) -------------

REGION_QUOTA_0 = {"name": "us-west2", "quotas": [{"metric": "CPUS", "limit": 24.0, "usage": 0.0},
                                                {"metric": "NVIDIA_T4_GPUS", "limit": 0.0, "usage": 0.0}]}
REGION_QUOTA_USED = {"name": "us-west2", "quotas": [{"metric": "NVIDIA_T4_GPUS", "limit": 1.0, "usage": 1.0}]}
REGION_OK = {"name": "us-west2", "quotas": [{"metric": "NVIDIA_T4_GPUS", "limit": 4.0, "usage": 1.0}]}
PROJECT_0 = {"name": "p", "quotas": [{"metric": "GPUS_ALL_REGIONS", "limit": 0.0, "usage": 0.0}]}
PROJECT_OK = {"name": "p", "quotas": [{"metric": "GPUS_ALL_REGIONS", "limit": 2.0, "usage": 0.0}]}
ZONES = ["us-west2-b", "us-west2-c"]


def _by_name(checks):
    return {c.name: c for c in checks}


def test_new_project_has_zero_quota_in_both_places():
    checks = _by_name(preflight.gce_checks("us-west2", "us-west2-b", "nvidia-tesla-t4", 1, REGION_QUOTA_0,
                                           PROJECT_0, ZONES))
    region, world = checks["NVIDIA_T4_GPUS"], checks["GPUS_ALL_REGIONS"]
    assert not region.ok and "new projects start at 0" in region.detail
    assert region.fix == "request a NVIDIA_T4_GPUS quota of at least 1 for region us-west2 (IAM & Admin > Quotas)"
    assert not world.ok and "the project (global)" in world.fix


def test_quota_used_up_by_another_vm_fails():
    check = _by_name(preflight.gce_checks("us-west2", "us-west2-b", "nvidia-tesla-t4", 1, REGION_QUOTA_USED,
                                          PROJECT_OK, ZONES))["NVIDIA_T4_GPUS"]
    assert not check.ok and "in use 1, free 0" in check.detail and "at least 2" in check.fix


def test_zone_without_a_t4_names_the_zones_that_have_one():
    check = _by_name(preflight.gce_checks("us-west2", "us-west2-a", "nvidia-tesla-t4", 1, REGION_OK, PROJECT_OK,
                                          ZONES))["nvidia-tesla-t4 in us-west2-a"]
    assert not check.ok and check.fix.startswith("pulumi config set gemma4-t4:zone us-west2-b")
    none = preflight.gce_checks("europe-west9", "europe-west9-a", "nvidia-tesla-t4", 1, REGION_OK, PROJECT_OK, [])
    assert "no zone of europe-west9 offers" in none[-1].detail


def test_all_good_passes():
    checks = preflight.gce_checks("us-west2", "us-west2-b", "nvidia-tesla-t4", 1, REGION_OK, PROJECT_OK, ZONES)
    assert all(c.ok for c in checks)
    assert "OK    NVIDIA_T4_GPUS" in preflight.format_checks(checks)


SM_QUOTAS = [{"QuotaName": "ml.g4dn.xlarge for endpoint usage", "QuotaCode": "L-B67CFA0C", "Value": 2.0},
             {"QuotaName": "ml.g6.xlarge for endpoint usage", "QuotaCode": "L-X", "Value": 1.0}]


@pytest.mark.parametrize("quotas,in_use,ok,fragment", [
    (SM_QUOTAS, 0, True, "limit 2, in use 0, free 2"),
    (SM_QUOTAS, 2, False, 'request "ml.g4dn.xlarge for endpoint usage" = 3 in us-east-2'),
    ([{"QuotaName": "ml.g4dn.xlarge for endpoint usage", "Value": 0.0}], 0, False, "= 1 in us-east-2"),
    ([], 0, False, "does not offer ml.g4dn.xlarge here"),
])
def test_sagemaker_endpoint_quota(quotas, in_use, ok, fragment):
    (check,) = preflight.sagemaker_checks("us-east-2", "ml.g4dn.xlarge", 1, quotas, in_use)
    assert check.ok is ok and fragment in check.detail + check.fix


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


def test_idle_stop_enables_the_timer_and_tells_the_guest(run_stack):
    plan = run_stack("gce-t4", "idleStopMinutes=30")
    assert ["systemctl", "enable", "gemma4-t4-provision.service", "gemma4-vllm.service",
            "gemma4-t4-idle-stop.timer"] in _runcmd(plan)
    guest_env = next(f["content"] for f in yaml.safe_load(plan.one(INSTANCE).inputs["metadata"]["user-data"])
                     ["write_files"] if f["path"] == "/etc/gemma4-t4/guest.env")
    assert "IDLE_STOP_MINUTES=30\n" in guest_env and "METRICS_URL=http://127.0.0.1:8000/metrics\n" in guest_env


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


# --- SageMaker time-to-live ------------------------------------------------------------------------


def test_no_schedule_unless_a_ttl_is_set(run_stack):
    assert run_stack("sagemaker-t4").find(SCHEDULE) == []


def test_ttl_deletes_the_endpoint_with_a_role_that_can_do_only_that(run_stack):
    plan = run_stack("sagemaker-t4", "endpointTtl=2030-06-01T18:30:00+02:00")
    schedule = plan.one(SCHEDULE).inputs
    assert schedule["scheduleExpression"] == "at(2030-06-01T16:30:00)"
    assert schedule["scheduleExpressionTimezone"] == "UTC"
    assert schedule["target"]["arn"] == "arn:aws:scheduler:::aws-sdk:sagemaker:deleteEndpoint"
    assert json.loads(schedule["target"]["input"]) == {"EndpointName": "gemma4-t4-endpoint"}
    policy = json.loads(plan.find("aws:iam/rolePolicy:RolePolicy", "gemma4-t4-ttl-policy")[0].inputs["policy"])
    assert policy["Statement"] == [{"Effect": "Allow", "Action": "sagemaker:DeleteEndpoint",
                                    "Resource": "arn:aws:mock:::gemma4-t4-endpoint"}]
    trust = json.loads(plan.find("aws:iam/role:Role", "gemma4-t4-ttl")[0].inputs["assumeRolePolicy"])
    assert trust["Statement"][0]["Principal"] == {"Service": "scheduler.amazonaws.com"}


@pytest.mark.parametrize("ttl,problem", [
    ("2020-01-01T00:00:00Z", "in the past"),
    ("tomorrow", "not an ISO 8601 time"),
    ("2030-01-01T00:00:00", "no time zone"),
])
def test_bad_ttl_is_refused(refused_stack, ttl, problem):
    error, partial = refused_stack("sagemaker-t4", f"endpointTtl={ttl}")
    assert error.key == "gemma4-t4:endpointTtl" and problem in str(error) and partial.resources == []


def test_ttl_too_close_is_refused():
    settings = SageMakerT4Settings("us-east-2", "ml.g4dn.xlarge", 1, "al2023-ami-sagemaker-inference-gpu-4-1",
                                   "img-cu130-", 900, 1800, False, endpoint_ttl="2030-01-01T00:10:00Z")
    with pytest.raises(Exception, match="less than 15 min away"):
        settings.ttl(now=datetime(2030, 1, 1, tzinfo=timezone.utc))


# --- the idle logic on recorded /metrics ------------------------------------------------------------


@pytest.fixture(scope="module")
def idle():
    spec = importlib.util.spec_from_file_location("idle_stop", REPO / "cloudinit" / "scripts" / "idle_stop.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def metrics(finished_stop: float, finished_length: float, running: float = 0, waiting: float = 0) -> str:
    return f"""# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{{engine="0",model_name="google/gemma-4-E2B-it-qat-w4a16-ct"}} {running}
vllm:num_requests_waiting{{engine="0",model_name="google/gemma-4-E2B-it-qat-w4a16-ct"}} {waiting}
# TYPE vllm:request_success_total counter
vllm:request_success_total{{engine="0",finished_reason="stop",model_name="google/gemma-4-E2B-it-qat-w4a16-ct"}} {finished_stop}
vllm:request_success_total{{engine="0",finished_reason="length",model_name="google/gemma-4-E2B-it-qat-w4a16-ct"}} {finished_length}
vllm:request_success_total_created{{engine="0",finished_reason="stop",model_name="x"}} 1.7e9
"""


def test_idle_for_the_window_stops(idle):
    state, stop, _ = idle.decide({}, metrics(3, 12), now=1000.0, idle_minutes=30)
    assert not stop and state == {"last_active": 1000.0, "finished": 15.0}
    state, stop, why = idle.decide(state, metrics(3, 12), now=1000.0 + 29 * 60, idle_minutes=30)
    assert not stop and "idle 29.0 of 30 min" in why
    _, stop, _ = idle.decide(state, metrics(3, 12), now=1000.0 + 30 * 60, idle_minutes=30)
    assert stop


def test_a_finished_request_or_one_in_flight_restarts_the_clock(idle):
    state = {"last_active": 0.0, "finished": 15.0}
    new, stop, _ = idle.decide(state, metrics(3, 13), now=5000.0, idle_minutes=5)
    assert not stop and new["last_active"] == 5000.0
    new, stop, _ = idle.decide(state, metrics(3, 12, running=1), now=5000.0, idle_minutes=5)
    assert not stop and new["last_active"] == 5000.0
    new, stop, _ = idle.decide(state, metrics(3, 12, waiting=2), now=5000.0, idle_minutes=5)
    assert not stop


def test_a_server_that_does_not_answer_is_never_idle(idle):
    state = {"last_active": 0.0, "finished": 15.0}
    new, stop, why = idle.decide(state, None, now=99999.0, idle_minutes=5)
    assert not stop and new["last_active"] == 99999.0 and "not answering" in why
    _, stop, _ = idle.decide(state, "# no vllm metrics here\n", now=99999.0, idle_minutes=5)
    assert not stop
