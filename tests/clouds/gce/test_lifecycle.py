"""Stop and start without destroy, through google-cloud-compute against recorded Compute Engine
responses (tests/compute_standin.py): a running VM, one already stopped, one that does not exist,
a start that finds no T4 free; the CLI's output and exit codes; `cost` from the offline plan."""

from __future__ import annotations

import json
import os
import sys

import pytest
from compute_standin import ComputeStandIn
from conftest import REPO, run

from gemma4_t4 import catalog
from gemma4_t4.clouds.gce import lifecycle
from gemma4_t4.core.targets import TargetError

pytestmark = pytest.mark.standin

PROJECT = "my-project"
# The recorded VM: n1-standard-2 + one T4, a 32 GB pd-ssd boot disk and the 250 GB pd-balanced data disk.
# The recorded VM and the stack file both sit in us-west2-b: us-west2's list prices.
PRICES = catalog.GCE_PRICES["us-west2"]
DISKS_PER_MONTH = round(32 * PRICES["disk:pd-ssd:gb-month"].usd_per_hour
                        + 250 * PRICES["disk:pd-balanced:gb-month"].usd_per_hour, 2)
RUNNING_PER_HOUR = round(PRICES["machine:n1-standard-2"].usd_per_hour + PRICES["gpu:nvidia-tesla-t4"].usd_per_hour, 4)


@pytest.fixture
def compute():
    standin = ComputeStandIn(PROJECT)
    yield standin
    standin.close()


def _vm(where: dict) -> lifecycle.Vm:
    return lifecycle.Vm(where["project"], where["zone"], where["instance"])


def cli(*args: str, env: dict | None = None):
    return run([sys.executable, "-m", "gemma4_t4", *args], cwd=REPO, env={**os.environ, **(env or {})})


def test_stop_waits_for_terminated_and_names_what_keeps_billing(compute):
    where = compute.add_vm("RUNNING")
    ticks = []
    result = lifecycle.stop(lifecycle.Compute(compute.url), _vm(where), interval_s=0.01,
                            on_tick=lambda elapsed, info: ticks.append(info))
    assert (result.status_before, result.status_after, result.changed) == ("RUNNING", "TERMINATED", True)
    assert compute.status(where["instance"]) == "TERMINATED"
    assert ("POST", f"instances/{where['instance']}/stop") in compute.calls
    assert {"operation": "stop RUNNING"} in ticks, "the wait reports the operation while it runs"
    assert [(d.type, d.size_gb) for d in result.disks] == [("pd-ssd", 32), ("pd-balanced", 250)]
    assert result.stopped_usd_per_month == DISKS_PER_MONTH
    assert result.running_usd_per_hour == RUNNING_PER_HOUR
    assert any("not its machine or GPU" in note for note in result.notes)


def test_a_spot_vm_is_priced_at_the_spot_list_prices(compute):
    """The recorded VM as a Spot VM: scheduling.provisioningModel SPOT (Compute Engine API, Scheduling:
    "SPOT" or "STANDARD"), with preemptible and no automatic restart, as the component creates it."""
    where = compute.add_vm("RUNNING")
    compute.instances[where["instance"]]["scheduling"].update(
        {"provisioningModel": "SPOT", "preemptible": True, "automaticRestart": False})
    result = lifecycle.stop(lifecycle.Compute(compute.url), _vm(where), interval_s=0.01)
    spot = (PRICES[catalog.spot_item("machine:n1-standard-2")].usd_per_hour
            + PRICES[catalog.spot_item("gpu:nvidia-tesla-t4")].usd_per_hour)
    assert result.running_usd_per_hour == round(spot, 4) < RUNNING_PER_HOUR
    assert result.stopped_usd_per_month == DISKS_PER_MONTH, "the disks bill the same on a Spot VM"


def test_stopping_a_stopped_vm_sends_no_stop(compute):
    where = compute.add_vm("TERMINATED")
    result = lifecycle.stop(lifecycle.Compute(compute.url), _vm(where), interval_s=0.01)
    assert not result.changed and result.status_after == "TERMINATED"
    assert not [call for call in compute.calls if call[0] == "POST"]
    assert result.notes[0] == "already stopped (TERMINATED): nothing to do"
    assert result.stopped_usd_per_month == DISKS_PER_MONTH, "the disks still bill, and the result says so"


def test_start_after_stop_comes_back_running_and_says_so(compute):
    where = compute.add_vm("TERMINATED")
    result = lifecycle.start(lifecycle.Compute(compute.url), _vm(where), interval_s=0.01)
    assert (result.status_before, result.status_after) == ("TERMINATED", "RUNNING")
    assert compute.status(where["instance"]) == "RUNNING"
    assert any("comes back by itself" in note for note in result.notes)
    assert any(f"${RUNNING_PER_HOUR}/h" in note for note in result.notes)
    again = lifecycle.start(lifecycle.Compute(compute.url), _vm(where), interval_s=0.01)
    assert not again.changed and sum(1 for call in compute.calls if call[1].endswith("/start")) == 1


def test_a_vm_that_does_not_exist_is_a_clear_error(compute):
    missing = lifecycle.Vm(PROJECT, "us-west2-b", "gemma4-t4-gone")
    for action in (lifecycle.stop, lifecycle.start):
        with pytest.raises(TargetError, match=r"instance gemma4-t4-gone \(us-west2-b, project my-project\) not found"):
            action(lifecycle.Compute(compute.url), missing, interval_s=0.01)
    assert not [call for call in compute.calls if call[0] == "POST"]


def test_a_start_without_a_free_t4_says_so_and_leaves_the_vm_stopped(compute):
    where = compute.add_vm("TERMINATED")
    compute.stockout = True
    with pytest.raises(TargetError) as caught:
        lifecycle.start(lifecycle.Compute(compute.url), _vm(where), interval_s=0.01)
    assert "ZONE_RESOURCE_POOL_EXHAUSTED" in str(caught.value) and "start it again later" in str(caught.value)
    assert compute.status(where["instance"]) == "TERMINATED"


def test_cli_stop_and_start_by_stack(compute, fake_pulumi):
    where = compute.add_vm("RUNNING")
    env = fake_pulumi({"cloud": "gce", "port": 8000, "target": where})
    stopped = cli("stop", "--stack", "gce-t4", "--compute-endpoint", compute.url, "--interval", "0.01", env=env)
    assert stopped.returncode == 0, stopped.stderr
    assert "RUNNING -> TERMINATED" in stopped.stdout and f"{DISKS_PER_MONTH:,.2f}" in stopped.stdout
    again = cli("stop", "--stack", "gce-t4", "--compute-endpoint", compute.url, "--json", env=env)
    assert again.returncode == 0 and json.loads(again.stdout)["changed"] is False
    started = cli("start", "--stack", "gce-t4", "--compute-endpoint", compute.url, "--interval", "0.01", "--json",
                  env=env)
    assert started.returncode == 0, started.stderr
    assert json.loads(started.stdout)["status_after"] == "RUNNING"


def test_cli_refuses_to_stop_a_sagemaker_stack_and_says_why(fake_pulumi):
    env = fake_pulumi({"cloud": "sagemaker", "port": 8080, "target": {"endpoint_name": "e", "region": "us-east-2"}})
    result = cli("stop", "--stack", "sagemaker-t4", env=env)
    assert result.returncode == 2 and "cannot be stopped, only deleted" in result.stderr
    assert "Traceback" not in result.stderr
    for command in ("stop", "start"):
        assert "SageMaker" in cli(command, "--help").stdout


def test_cli_names_a_missing_vm_and_bad_usage(compute):
    missing = cli("stop", "--instance", "nope", "--zone", "us-west2-b", "--project", PROJECT, "--compute-endpoint",
                  compute.url)
    assert missing.returncode == 1 and "instance nope (us-west2-b, project my-project) not found" in missing.stderr
    assert "Traceback" not in missing.stderr
    usage = cli("start", "--instance", "nope")
    assert usage.returncode == 2 and "--instance needs --zone and --project" in usage.stderr


def test_cost_from_the_plan_counts_the_disks_a_stopped_vm_keeps():
    gce = json.loads(cli("cost", "gce-t4", "--json").stdout)
    assert gce["stopped_usd_per_month"] == DISKS_PER_MONTH
    assert gce["running_usd_per_hour"] > RUNNING_PER_HOUR  # the disks and the address bill while serving too
    bigger = json.loads(cli("cost", "gce-t4", "--config", "gemma4-t4:dataDiskSizeGb=500", "--json").stdout)
    assert bigger["stopped_usd_per_month"] == round(
        DISKS_PER_MONTH + 250 * PRICES["disk:pd-balanced:gb-month"].usd_per_hour, 2)
    sagemaker = cli("cost", "sagemaker-t4")
    assert sagemaker.returncode == 0 and "cannot stop" in sagemaker.stdout
    refused = cli("cost", "gce-t4", "--config", "gemma4-t4:dtype=bfloat16")
    assert refused.returncode == 2 and "fix: pulumi config set gemma4-t4:dtype float16" in refused.stderr


@pytest.mark.parametrize("action", ["stop", "start"])
def test_a_vm_without_the_components_label_is_left_alone(compute, action):
    where = compute.add_vm("RUNNING" if action == "stop" else "TERMINATED", labels={"team": "other"})
    with pytest.raises(TargetError, match=r"has no label app=gemma4-t4: it is not a VM gemma4-t4 made") as caught:
        getattr(lifecycle, action)(lifecycle.Compute(compute.url), _vm(where), interval_s=0.01)
    assert "team=other" in str(caught.value)
    assert not any(verb.endswith(("/stop", "/start")) for _, verb in compute.calls), "nothing was changed"
    assert compute.status(where["instance"]) == ("RUNNING" if action == "stop" else "TERMINATED")


def test_an_operator_with_the_role_on_the_vm_alone_stops_and_starts_it(compute):
    """The stack's operator role (catalog.GCE_OPERATOR_PERMISSIONS) reads neither the zone's operations nor the
    disks: stop and start follow the VM's own status, and list no disk bills."""
    compute.forbidden = {"disks", "operations"}
    where = compute.add_vm("RUNNING")
    stopped = lifecycle.stop(lifecycle.Compute(compute.url), _vm(where), interval_s=0.01)
    assert (stopped.status_before, stopped.status_after) == ("RUNNING", "TERMINATED") and stopped.disks == []
    started = lifecycle.start(lifecycle.Compute(compute.url), _vm(where), interval_s=0.01)
    assert (started.status_before, started.status_after) == ("TERMINATED", "RUNNING")
    assert ("GET", next(c for _, c in compute.calls if c.startswith("operations/"))) in compute.calls
