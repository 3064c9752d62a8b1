"""`gemma4-t4 up` and `down` as a user runs them, with no cloud: Pulumi's Automation API drives a stand-in `pulumi`
(tests/pulumi_standin.py, each answer cited to the SDK's source or the CLI's), GCE's refusals come as the provider
prints them, the Compute API (quota, T4 zones, disks) is tests/compute_standin.py on loopback."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from compute_standin import ComputeStandIn
from conftest import REPO

from gemma4_t4.cli import main

pytestmark = pytest.mark.standin

PROJECT = "gemma-proj"
DISK = "gemma4-t4-gce-t4-data"


class World:
    """The user's machine (a project checkout, gcloud's config, `pulumi` on PATH) and the cloud behind it."""

    def __init__(self, tmp: Path, monkeypatch: pytest.MonkeyPatch):
        self.home = tmp / "pulumi-standin"
        self.home.mkdir()
        self.project = tmp / "project"
        self.project.mkdir()
        for name in ("Pulumi.yaml", "Pulumi.gce-t4.yaml", "Pulumi.sagemaker-t4.yaml"):
            shutil.copy(REPO / name, self.project / name)
        bin_dir = tmp / "bin"
        bin_dir.mkdir()
        pulumi = bin_dir / "pulumi"
        pulumi.write_text(f"#!/bin/sh\nexec {sys.executable} {REPO / 'tests' / 'pulumi_standin.py'} \"$@\"\n")
        pulumi.chmod(0o755)
        gcloud = tmp / "gcloud"
        (gcloud / "configurations").mkdir(parents=True)
        (gcloud / "active_config").write_text("default")
        (gcloud / "configurations" / "config_default").write_text(f"[core]\nproject = {PROJECT}\n")
        self.env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "PULUMI_STANDIN_DIR": str(self.home),
                    "CLOUDSDK_CONFIG": str(gcloud), "PULUMI_CONFIG_PASSPHRASE": "x"}
        for key, value in self.env.items():
            monkeypatch.setenv(key, value)
        monkeypatch.chdir(self.project)
        self.compute = ComputeStandIn(PROJECT, world=self.home / "world.json")
        self.compute.__enter__()

    def scenario(self, **wanted) -> None:
        (self.home / "scenario.json").write_text(json.dumps(wanted))

    def world(self) -> dict:
        path = self.home / "world.json"
        return json.loads(path.read_text()) if path.is_file() else {"disks": {}, "instances": {}}

    def stack_file(self, stack: str = "gce-t4") -> dict:
        import yaml

        return yaml.safe_load((self.project / f"Pulumi.{stack}.yaml").read_text())["config"] or {}

    def argv(self) -> list[list[str]]:
        return [json.loads(line) for line in (self.home / "argv.log").read_text().splitlines()]

    def gemma(self, *args: str) -> int:
        return main([*args, "--compute-endpoint", self.compute.url])


def _vllm_health() -> ThreadingHTTPServer:
    """vLLM's OpenAI server as far as `wait` asks: /health answers 200 with an empty body
    (vllm/entrypoints/openai/api_server.py)."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200 if self.path == "/health" else 404)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.fixture
def world(tmp_path, monkeypatch):
    made = World(tmp_path, monkeypatch)
    yield made
    made.compute.__exit__(None, None, None)


def test_a_new_stack_is_made_in_the_cheapest_zone_with_quota_and_its_choices_are_in_the_stack_file(world, capsys):
    assert world.gemma("up", "gce-t4", "--yes", "--no-wait") == 0
    config = world.stack_file()
    # us-central1 and us-east1 have T4 quota in the recorded project; us-central1 is the cheaper (catalog).
    assert config["gemma4-t4:zone"] == "us-central1-a"
    assert config["gcp:project"] == PROJECT  # from gcloud's configuration
    out = capsys.readouterr()
    assert "/day" in out.out and "after `gemma4-t4 down`" in out.out and "Spot in us-central1-a" in out.out
    assert "created gcp:compute/instance:Instance" in out.err
    assert "gemma4-t4 query -s gce-t4" in out.out and "gemma4-t4 down gce-t4" in out.out
    calls = world.argv()
    assert ["--non-interactive", "stack", "init", "gce-t4"] in calls
    up = next(c for c in calls if "up" in c)
    assert up[:7] == ["--non-interactive", "up", "--yes", "--skip-preview", "--exec-kind", "auto.local",
                      "--event-log"] and up[7].startswith("tcp://127.0.0.1:")
    assert "us-central1-a/gemma4-t4-gce-t4-vm" in world.world()["instances"]


def test_without_a_terminal_and_without_yes_nothing_is_made(world, capsys):
    assert world.gemma("up", "gce-t4", "--no-wait") == 2
    assert "pass --yes" in capsys.readouterr().err
    assert not any("init" in call or "up" in call for call in world.argv())
    assert world.world() == {"disks": {}, "instances": {}}


def test_a_stockout_moves_to_the_next_zone_of_the_region_deleting_the_empty_disk(world, capsys):
    world.scenario(stockout=["us-central1-a"])
    assert world.gemma("up", "gce-t4", "--yes", "--no-wait") == 0
    err = capsys.readouterr().err
    assert "us-central1-a: no T4 free in the zone" in err
    assert f"deleted the empty data disk {DISK} in us-central1-a" in err and "moving to us-central1-b" in err
    assert world.stack_file()["gemma4-t4:zone"] == "us-central1-b"
    assert set(world.world()["disks"]) == {f"us-central1-b/{DISK}"}
    assert f"DELETE /compute/v1/projects/{PROJECT}/zones/us-central1-a/disks/{DISK}" in world.compute.requests


def test_a_regional_quota_refusal_moves_to_another_region(world, capsys):
    world.scenario(quota=["us-central1"])
    assert world.gemma("up", "gce-t4", "--yes", "--no-wait") == 0
    err = capsys.readouterr().err
    assert "us-central1-a: no quota in us-central1" in err and "moving to us-east1-c" in err, err
    assert world.stack_file()["gemma4-t4:zone"] == "us-east1-c"  # us-east1-b: not in the catalog
    assert set(world.world()["disks"]) == {f"us-east1-c/{DISK}"}


def test_a_disk_that_held_data_is_never_deleted(world, capsys):
    """A kept disk (a VM attached it, then `down` left it) is adopted, and a stock-out then stops the move."""
    world.scenario()
    assert world.gemma("up", "gce-t4", "--yes", "--no-wait", "--zone", "us-east1-c") == 0
    assert world.gemma("down", "gce-t4", "--yes") == 0
    world.scenario(stockout=["us-east1-c"])
    assert world.gemma("up", "gce-t4", "--yes", "--no-wait") == 1
    err = capsys.readouterr().err
    assert "was not made empty by this attempt: it is never deleted" in err
    assert f"us-east1-c/{DISK}" in world.world()["disks"]
    assert not any(r.startswith("DELETE") for r in world.compute.requests)
    assert world.stack_file()["gemma4-t4:zone"] == "us-east1-c"


def test_a_project_without_gpu_quota_anywhere_stops_at_once(world, capsys):
    world.scenario(global_quota=True)
    assert world.gemma("up", "gce-t4", "--yes", "--no-wait") == 1
    assert "GPUS_ALL_REGIONS" in capsys.readouterr().err
    assert sum(1 for c in world.argv() if "up" in c) == 1


def test_moves_is_the_most_zones_tried(world, capsys):
    world.scenario(stockout=["us-central1-a", "us-central1-b", "us-central1-c"])
    assert world.gemma("up", "gce-t4", "--yes", "--no-wait", "--moves", "1") == 1
    assert "the most --moves allows" in capsys.readouterr().err
    assert sum(1 for c in world.argv() if "up" in c) == 2


def test_down_keeps_the_data_disk_and_says_what_it_bills_and_delete_data_deletes_it(world, capsys):
    assert world.gemma("up", "gce-t4", "--yes", "--no-wait") == 0
    assert world.gemma("down", "gce-t4", "--yes") == 0
    out = capsys.readouterr().out
    assert f"still billing: the data disk {DISK} in us-central1-a, 250 GB" in out and "/month" in out
    assert f"us-central1-a/{DISK}" in world.world()["disks"] and not world.world()["instances"]
    assert world.gemma("up", "gce-t4", "--yes", "--no-wait") == 0  # adopts it
    assert world.gemma("down", "gce-t4", "--yes", "--delete-data") == 0
    assert f"deleted the data disk {DISK}" in capsys.readouterr().out
    assert world.world()["disks"] == {}


def test_ctrl_c_during_up_leaves_a_stack_that_up_finishes(world):
    world.scenario(hang=True)
    env = {**os.environ, **world.env}
    child = subprocess.Popen([sys.executable, "-m", "gemma4_t4", "up", "gce-t4", "--yes", "--no-wait",
                              "--compute-endpoint", world.compute.url], cwd=world.project, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.monotonic() + 120
    while not (world.home / "hanging").exists():
        assert child.poll() is None and time.monotonic() < deadline, child.communicate()
        time.sleep(0.2)
    os.killpg(child.pid, signal.SIGINT)  # as a terminal's Ctrl-C: the whole foreground group
    _, err = child.communicate(timeout=60)
    assert child.returncode == 130, err
    assert "interrupted: stack gce-t4 is saved as far as it got" in err
    world.scenario()
    assert world.gemma("up", "gce-t4", "--yes", "--no-wait") == 0
    assert len(world.world()["instances"]) == 1


G4DN = "ml.g4dn.xlarge for endpoint usage"


def test_sagemaker_up_refuses_before_anything_is_made_without_the_endpoint_quota(world, aws, monkeypatch, capsys):
    from aws_standin import add_sagemaker_quotas

    add_sagemaker_quotas(monkeypatch, {G4DN: 0.0}, applied={})
    assert world.gemma("up", "sagemaker-t4", "--yes", "--no-wait") == 1
    err = capsys.readouterr().err
    assert G4DN in err and "nothing was made" in err
    assert not any("init" in call for call in world.argv())


def test_sagemaker_up_then_down(world, aws, monkeypatch, capsys):
    from aws_standin import add_sagemaker_quotas

    add_sagemaker_quotas(monkeypatch, {G4DN: 1.0}, applied={})
    assert world.gemma("up", "sagemaker-t4", "--yes", "--no-wait") == 0
    out = capsys.readouterr()
    assert "created aws:sagemaker/endpoint:Endpoint" in out.err and "gemma4-t4 query -s sagemaker-t4" in out.out
    assert world.stack_file("sagemaker-t4")["aws:region"] == "us-east-2"  # the stack file's own, kept
    assert world.gemma("down", "sagemaker-t4", "--yes") == 0
    assert "nothing of the stack is left billing" in capsys.readouterr().out


def test_a_failure_no_move_cures_shows_pulumis_diagnostic_and_moves_nowhere(world, capsys):
    world.scenario(live_migration=True)
    assert world.gemma("up", "gce-t4", "--yes", "--no-wait") == 1
    err = capsys.readouterr().err
    assert "Instances with guest accelerators do not support live migration" in err
    assert "moving to" not in err and sum(1 for c in world.argv() if "up" in c) == 1


def test_a_stack_locked_by_a_pulumi_killed_hard_says_how_to_unlock(world, capsys):
    assert world.gemma("up", "gce-t4", "--yes", "--no-wait") == 0
    state = json.loads((world.home / "state.json").read_text())
    state["gce-t4"]["locked"] = 12345
    (world.home / "state.json").write_text(json.dumps(state))
    assert world.gemma("up", "gce-t4", "--yes", "--no-wait") == 1
    assert "pulumi cancel --stack gce-t4 --yes" in capsys.readouterr().err


def test_up_waits_for_the_first_answer_and_ends_with_the_query_line(world, fake_gcloud, monkeypatch, capsys):
    """Not --no-wait: the stack's own IAP tunnel (tests/gcloud_standin.py) to a server answering /health as vLLM."""
    vm = _vllm_health()
    try:
        env = fake_gcloud(dict(os.environ), vm_port=vm.server_address[1])
        monkeypatch.setenv("PATH", env["PATH"])
        monkeypatch.setenv("GCLOUD_STANDIN_VM_PORT", env["GCLOUD_STANDIN_VM_PORT"])
        assert world.gemma("up", "gce-t4", "--yes") == 0
    finally:
        vm.shutdown()
        vm.server_close()
    out = capsys.readouterr().out
    assert 'gemma4-t4 query -s gce-t4 "Name the four inner planets."' in out and "$0.4450/h" in out


def test_a_new_sagemaker_stack_of_any_name_takes_the_users_aws_region(world, aws, monkeypatch, capsys):
    from aws_standin import add_sagemaker_quotas

    add_sagemaker_quotas(monkeypatch, {G4DN: 1.0}, applied={})
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-2")
    monkeypatch.delenv("AWS_REGION", raising=False)
    assert world.gemma("up", "my-endpoint", "--cloud", "sagemaker", "--yes", "--no-wait") == 0
    config = world.stack_file("my-endpoint")
    assert config["gemma4-t4:cloud"] == "sagemaker" and config["aws:region"] == "us-east-2"
    assert config["gemma4-t4:maxModelLen"] == "8192"  # the shipped sagemaker-t4's own setting
    assert world.gemma("up", "my-endpoint", "--cloud", "gce", "--yes", "--no-wait") == 2


def test_without_a_project_anywhere_up_says_how_to_name_one_before_anything_is_made(world, monkeypatch, capsys):
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(world.home / "no-gcloud"))
    assert world.gemma("up", "gce-t4", "--yes", "--no-wait") == 2
    assert "gcp:project" in capsys.readouterr().err
    assert not any("init" in call for call in world.argv())
    assert world.gemma("up", "gce-t4", "--yes", "--no-wait", "--project", PROJECT) == 0
    assert world.stack_file()["gcp:project"] == PROJECT
