"""A GCE stack's server is reached through the stack's own IAP tunnel, never through whatever
already listens on a local port: an unrelated server there is never reported as the stack's.

The two servers are stand-ins for vLLM's OpenAI server answering /health (200, empty body) and
/v1/models (vllm/entrypoints/openai/api_server.py: {"object": "list", "data": [{"id", "max_model_len"}]})."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from conftest import REPO, free_port, run, send_json


def serving(model: str, port: int = 0, health: int = 200) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            if self.path == "/health":
                self.send_response(health)
                self.send_header("Content-Length", "0")
                self.end_headers()
            elif self.path == "/v1/models":
                send_json(self, 200, {"object": "list", "data": [{"id": model, "object": "model",
                                                                  "max_model_len": 256}]})
            else:
                self.send_error(404)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.fixture
def unrelated():
    """Another server on 127.0.0.1:8000 (every GCE stack's default port), or, where something on
    this machine already holds 8000, on another port that the stack then names as its own."""
    try:
        server = serving("someone-elses-model", 8000)
    except OSError:
        server = serving("someone-elses-model")
    yield server
    server.shutdown()
    server.server_close()


def cli(*args: str, env: dict):
    return run([sys.executable, "-m", "gemma4_t4", *args], cwd=REPO, env=env)


def stack(port: int) -> dict:
    return {"cloud": "gce", "port": port, "served_model_name": "the-stacks-model",
            "target": {"instance": "gemma4-t4-gce-t4-vm", "zone": "us-west2-b", "project": "p"}}


def test_an_unrelated_server_is_not_the_stack_when_the_tunnel_cannot_open(unrelated, fake_pulumi, fake_gcloud):
    env = fake_gcloud(dict(os.environ, **fake_pulumi(stack(unrelated.server_address[1]))), logged_out=True)
    for args in (("status", "-s", "gce-t4"), ("status", "--stack", "gce-t4", "--json"),
                 ("query", "hi", "--stack", "gce-t4"), ("wait", "--stack", "gce-t4", "--timeout", "0")):
        result = cli(*args, env=env)
        assert result.returncode == 1, (args, result.stdout, result.stderr)
        assert "serving" not in result.stdout and "someone-elses-model" not in result.stdout + result.stderr
        assert "gcloud auth login" in result.stderr and "Traceback" not in result.stderr


def test_the_stacks_own_tunnel_reaches_its_vm_and_not_the_unrelated_server(unrelated, fake_pulumi, fake_gcloud):
    vm = serving("the-stacks-model")
    try:
        env = fake_gcloud(dict(os.environ, **fake_pulumi(stack(unrelated.server_address[1]))),
                          vm_port=vm.server_address[1])
        result = cli("status", "-s", "gce-t4", "--json", env=env)
        assert result.returncode == 0, result.stderr
        status = json.loads(result.stdout)
        assert status["serving"] is True and status["target"] == "gce:gemma4-t4-gce-t4-vm"
        assert status["details"]["vram_total_mib"] == 15360  # nvidia-smi over SSH, once the tunnel is up
        assert [m["id"] for m in status["models"]] == ["the-stacks-model"]
    finally:
        vm.shutdown()
        vm.server_close()


def test_the_tunnel_takes_a_port_nothing_listens_on(unrelated, fake_gcloud, monkeypatch):
    from gemma4_t4.clouds.gce.target import GceTarget

    vm = serving("the-stacks-model")
    env = fake_gcloud(dict(os.environ), vm_port=vm.server_address[1])
    monkeypatch.setenv("PATH", env["PATH"])
    monkeypatch.setenv("GCLOUD_STANDIN_VM_PORT", env["GCLOUD_STANDIN_VM_PORT"])
    port = unrelated.server_address[1]
    target = GceTarget(f"http://127.0.0.1:{port}", instance="vm", zone="us-west2-b", project="p", port=port)
    try:
        target.open_tunnel()
        assert target.local_port != port and target.base_url == f"http://127.0.0.1:{target.local_port}"
        assert [m["id"] for m in target.models()] == ["the-stacks-model"]
        with socket.create_connection(("127.0.0.1", target.local_port), timeout=1):
            pass
    finally:
        target.close()
        vm.shutdown()
        vm.server_close()


def test_status_and_wait_say_why_not_in_text_and_json():
    """vLLM's /health answers 503 once its engine is dead (api_server.py: EngineDeadError)."""
    dead_engine = serving("m", health=503)
    nothing = f"http://127.0.0.1:{free_port()}"
    try:
        url = f"http://127.0.0.1:{dead_engine.server_address[1]}"
        text = cli("status", "--url", url, env=dict(os.environ))
        assert text.returncode == 1 and "NOT serving (/health answered HTTP 503)" in text.stdout
        as_json = json.loads(cli("status", "--url", nothing, "--json", env=dict(os.environ)).stdout)
        assert as_json["serving"] is False and as_json["reason"].startswith("cannot connect to")
        assert as_json["schema_version"] == 1
        waited = cli("wait", "--url", url, "--timeout", "0", "--json", env=dict(os.environ))
        assert waited.returncode == 1 and json.loads(waited.stdout)["last_probe"] == "/health answered HTTP 503"
        plain = cli("wait", "--url", url, "--timeout", "0", env=dict(os.environ))
        assert "(last check: /health answered HTTP 503)" in plain.stderr
    finally:
        dead_engine.shutdown()
        dead_engine.server_close()


# --- a first boot, as `wait` lives through it -----------------------------------------------------
# The VM's life is a JSON file the stand-in gcloud reads at every run (tests/gcloud_standin.py), its
# guest attributes the Compute stand-in's (tests/compute_standin.py). The test moves the VM on when
# the stand-in's log shows `wait` has seen the moment, never by the clock alone.


class Vm:
    def __init__(self, tmp_path, standin):
        self.state_path, self.log_path = tmp_path / "vm.json", tmp_path / "gcloud.log"
        self.standin, self.name = standin, standin.add_vm()["instance"]
        self.port = free_port()
        self.server: ThreadingHTTPServer | None = None
        self.epoch = int(time.time()) - 600
        self.history: list[str] = []
        self.set(sshd=False, boot=0)
        self.log_path.write_text("")

    def set(self, **state) -> None:
        current = json.loads(self.state_path.read_text()) if self.state_path.exists() else {}
        self.state_path.write_text(json.dumps({**current, **state}))

    def phase(self, phase: str, detail: str = "") -> None:
        self.history.append(f"{phase}@{self.epoch + 60 * len(self.history)}")
        self.standin.set_guest(self.name, phase=phase, detail=detail, history=" ".join(self.history))

    def log(self) -> list[str]:
        return self.log_path.read_text().splitlines()

    def until(self, what, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while not what(self.log()):
            assert time.monotonic() < deadline, f"the stand-in never saw it; its log: {self.log()}"
            time.sleep(0.05)

    def serve(self) -> None:
        self.server = serving("the-stacks-model", self.port)

    def env(self, fake_pulumi, fake_gcloud, **extra: str) -> dict:
        outputs = {"cloud": "gce", "port": 8000, "served_model_name": "the-stacks-model",
                   "target": {"instance": self.name, "zone": "us-west2-b", "project": self.standin.project}}
        env = fake_gcloud(dict(os.environ, **fake_pulumi(outputs)), vm_port=self.port)
        return {**env, "GCLOUD_STANDIN_VM_STATE": str(self.state_path), "GCLOUD_STANDIN_LOG": str(self.log_path),
                **extra}

    def pids(self) -> list[int]:
        return [int(word.split("=")[1]) for line in self.log() if line.startswith("open")
                for word in line.split() if word.startswith(("gcloud=", "ssh="))]

    def close(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()


def running(pid: int) -> bool:
    """PID exists and is not a zombie (an exited child nobody reaped yet is not running)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (FileNotFoundError, ProcessLookupError):
        return False


@pytest.fixture
def vm(tmp_path):
    from compute_standin import ComputeStandIn

    standin = ComputeStandIn()
    machine = Vm(tmp_path, standin)
    yield machine
    machine.close()
    standin.close()


def wait_cli(vm: Vm, env: dict, *extra: str, stdin=None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "gemma4_t4", "wait", "-s", "gce-t4", "--interval", "0.2",
                             "--compute-endpoint", vm.standin.url, *extra], cwd=REPO, env=env, text=True,
                            stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def refusals(log: list[str]) -> int:
    return sum(line.startswith("refused") for line in log)


def test_wait_lives_through_sshd_not_up_the_drivers_reboot_and_reports_healthy(vm, fake_pulumi, fake_gcloud):
    waiting = wait_cli(vm, vm.env(fake_pulumi, fake_gcloud), "--timeout", "240", "--json")
    try:
        vm.until(lambda log: refusals(log) >= 3)  # sshd not up yet: IAP answers 4003, three times
        vm.phase("provision")
        vm.phase("driver", "building the open module with DKMS")
        vm.set(sshd=True)
        vm.until(lambda log: any(line.startswith("open") for line in log))
        time.sleep(1)  # a few polls through the open tunnel: vLLM is not there yet
        vm.phase("reboot")
        vm.set(sshd=False, boot=1)  # the driver's reboot ends the tunnel; sshd is down a while
        vm.until(lambda log: "closed by remote host" in log and refusals(log[log.index("closed by remote host"):]) >= 2)
        vm.set(sshd=True)
        vm.phase("vllm-install")
        vm.phase("model-download", "3.1 of 8.3 GB")
        vm.phase("loading", "compiling")
        vm.until(lambda log: sum(line.startswith("open") for line in log) >= 2)
        vm.phase("serving")
        vm.serve()
        out, err = waiting.communicate(timeout=120)
    finally:
        waiting.kill()
    assert waiting.returncode == 0, err
    result = json.loads(out)
    assert result["healthy"] is True and result["vm_status"] == "RUNNING" and result["phase"] == "serving"
    phases = ["provision", "driver", "reboot", "vllm-install", "model-download", "loading", "serving"]
    assert [p["phase"] for p in result["phases"]] == phases
    assert [p["seconds"] for p in result["phases"][:-1]] == [60.0] * 6
    assert result["phases"][0]["started"] == vm.epoch
    began = [err.index(f"phase {p} began") for p in phases]
    assert began == sorted(began), err
    assert "sshd does not answer yet (IAP 4003" in err and "the VM closed the tunnel" in err
    assert "vLLM does not answer on the VM yet (the tunnel is up" in err
    assert "oom" not in err.lower()
    assert not [pid for pid in vm.pids() if running(pid)], "a gcloud or ssh outlived wait"


def test_a_vm_whose_sshd_never_answers_ends_saying_what_was_seen(vm, fake_pulumi, fake_gcloud):
    vm.phase("provision")
    vm.phase("driver", "building the open module with DKMS")
    _, err = wait_cli(vm, vm.env(fake_pulumi, fake_gcloud), "--timeout", "3").communicate(timeout=120)
    assert refusals(vm.log()) >= 2, "the tunnel was opened again while sshd did not answer"
    assert "not healthy after 3s" in err
    assert "last check: the VM's sshd does not answer yet (IAP 4003: failed to connect to backend)" in err
    assert "the guest's phase: driver: building the open module with DKMS" in err
    assert "oom" not in err.lower() and "Traceback" not in err


def test_wait_before_the_vm_exists_says_so(vm, fake_pulumi, fake_gcloud):
    vm.standin.instances.clear()
    _, err = wait_cli(vm, vm.env(fake_pulumi, fake_gcloud), "--timeout", "1").communicate(timeout=120)
    assert "vm: not created yet" in err
    assert "there is no VM yet: is `pulumi up` still creating it" in err and "oom" not in err.lower()


def test_a_failure_the_guest_does_not_retry_ends_the_wait_at_once_with_its_words(vm, fake_pulumi, fake_gcloud):
    vm.phase("provision")
    vm.phase("driver")
    # provision.sh's give_up (a driver that never loaded through its reboots).
    vm.phase("failed", "step 'nvidia driver', not retried: not loaded after 2 reboots. Fix: read 'journalctl -k'")
    started = time.monotonic()
    waiting = wait_cli(vm, vm.env(fake_pulumi, fake_gcloud), "--timeout", "600")
    _, err = waiting.communicate(timeout=120)
    assert time.monotonic() - started < 60 and waiting.returncode == 1
    assert "the VM's guest stopped at a failure it does not retry" in err
    assert "failed (the guest does not retry): step 'nvidia driver', not retried" in err
    out, _ = wait_cli(vm, vm.env(fake_pulumi, fake_gcloud), "--timeout", "600", "--json").communicate(timeout=120)
    result = json.loads(out)
    assert result["healthy"] is False and result["reason"] == "guest failed"
    assert result["detail"].startswith("step 'nvidia driver', not retried")


def looked_at_guest(vm: Vm, times: int, timeout: float = 90) -> None:
    """Until `wait` has read the guest attributes TIMES more times (the Compute stand-in's calls)."""
    def reads() -> int:
        return sum(call == ("GET", f"instances/{vm.name}/getGuestAttributes") for call in list(vm.standin.calls))

    wanted, deadline = reads() + times, time.monotonic() + timeout
    while reads() < wanted:
        assert time.monotonic() < deadline, f"wait read the guest attributes {reads()} times"
        time.sleep(0.05)


def test_a_failure_the_guest_retries_is_waited_through_and_shown(vm, fake_pulumi, fake_gcloud):
    """An apt mirror blip on NVIDIA's repository: provision.sh says `retrying`, and its next attempt gets
    through. `wait` shows each retry and goes on to healthy (before, it ended at the first retry, exit 1)."""
    blip = ("step 'nvidia driver' (exit 100, attempt 1), retried every 30 s. Fix: check that the VM reaches "
            "https://developer.download.nvidia.com/compute/cuda/repos/debian13/x86_64/")
    vm.set(sshd=True)
    vm.phase("provision")
    vm.phase("driver")
    vm.phase("retrying", blip)
    waiting = wait_cli(vm, vm.env(fake_pulumi, fake_gcloud), "--timeout", "240", "--json")
    try:
        looked_at_guest(vm, times=3)  # three polls saw `retrying`: none of them ended the wait
        assert waiting.poll() is None, waiting.communicate()
        vm.standin.set_guest(vm.name, detail=blip.replace("attempt 1", "attempt 2"))
        looked_at_guest(vm, times=2)
        vm.phase("provision")
        vm.phase("driver")
        vm.phase("vllm-install")
        vm.phase("loading")
        vm.phase("serving")
        vm.serve()
        out, err = waiting.communicate(timeout=120)
    finally:
        waiting.kill()
    assert waiting.returncode == 0, err
    result = json.loads(out)
    assert result["healthy"] is True and result["phase"] == "serving"
    assert result["retries"] == [blip, blip.replace("attempt 1", "attempt 2")]
    assert f"retrying (the guest tries again by itself): {blip}" in err


def test_iap_not_authorized_ends_with_the_role_to_grant(vm, fake_gcloud, monkeypatch):
    from gemma4_t4.clouds.gce import target as targets
    from gemma4_t4.core import ops

    env = vm.env(lambda outputs: {}, fake_gcloud)
    for key in ("PATH", "GCLOUD_STANDIN_VM_PORT", "GCLOUD_STANDIN_VM_STATE", "GCLOUD_STANDIN_LOG"):
        monkeypatch.setenv(key, env[key])
    vm.set(sshd=True, iap="not-authorized")
    # The real grace is two minutes (IAP may refuse a new VM that long); a second here.
    signs = tuple(targets.TunnelSign(s.text, s.seen, 1.0) if s.text.startswith("4033") else s
                  for s in targets.TUNNEL_SIGNS)
    monkeypatch.setattr(targets, "TUNNEL_SIGNS", signs)
    target = targets.GceTarget("http://127.0.0.1:8000", instance=vm.name, zone="us-west2-b", project="p")
    try:
        with pytest.raises(targets.TargetError) as refused:
            ops.wait(target, timeout_s=60, interval_s=0.2)
    finally:
        target.close()
    assert "4033: not authorized" in str(refused.value) and "roles/iap.tunnelResourceAccessor" in str(refused.value)
    assert refusals(vm.log()) >= 2


def test_the_first_runs_key_prompt_cannot_hold_a_command(vm, fake_pulumi, fake_gcloud):
    """No key yet: gcloud would ask for a passphrase on a stdin the user never sees."""
    vm.set(sshd=True)
    vm.serve()
    env = vm.env(fake_pulumi, fake_gcloud, GCLOUD_STANDIN_NO_KEY="1")
    status = subprocess.Popen([sys.executable, "-m", "gemma4_t4", "status", "-s", "gce-t4", "--json",
                               "--compute-endpoint", vm.standin.url], cwd=REPO, env=env, text=True,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        out, err = status.communicate(timeout=120)  # stdin stays open and silent, as a terminal would
    finally:
        status.kill()
    assert status.returncode == 0, err
    assert json.loads(out)["serving"] is True
    assert "prompted for a passphrase" not in vm.log()


def test_ctrl_c_during_wait_ends_gcloud_and_its_ssh(vm, fake_pulumi, fake_gcloud):
    vm.set(sshd=True)  # the tunnel opens; vLLM never answers
    waiting = wait_cli(vm, vm.env(fake_pulumi, fake_gcloud), "--timeout", "600")
    try:
        vm.until(lambda log: any(line.startswith("open") for line in log))
        pids = vm.pids()
        assert pids and all(running(pid) for pid in pids)
        waiting.send_signal(signal.SIGINT)  # to `wait` alone: the tunnel runs in its own session
        _, err = waiting.communicate(timeout=60)
    finally:
        waiting.kill()
    assert waiting.returncode == 130, err
    deadline = time.monotonic() + 10
    while any(running(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [pid for pid in pids if running(pid)], "gcloud or its ssh outlived Ctrl-C"


def test_the_guests_history_becomes_phases_with_their_times():
    from gemma4_t4.clouds.gce.lifecycle import Phase, parse_phases

    phase, detail, phases = parse_phases(
        {"phase": "driver", "detail": "DKMS", "history": "provision@1000 bogus driver@1012 reboot@x"}, now=1100)
    assert (phase, detail) == ("driver", "DKMS")
    assert phases == [Phase("provision", 1000, 12.0), Phase("driver", 1012, 88.0)]


def test_status_while_the_vm_boots_says_what_it_sees(vm, fake_pulumi, fake_gcloud):
    vm.phase("provision")
    vm.phase("driver", "building the open module with DKMS")
    result = cli("status", "-s", "gce-t4", "--compute-endpoint", vm.standin.url,
                 env=vm.env(fake_pulumi, fake_gcloud))
    assert result.returncode == 1, result.stderr
    assert "NOT serving (the VM's sshd does not answer yet (IAP 4003: failed to connect to backend)" in result.stdout
    assert "RUNNING" in result.stdout and "driver (building the open module with DKMS)" in result.stdout
    assert "Traceback" not in result.stderr


def test_logs_follow_reconnects_after_the_reboot_from_where_it_dropped(vm, fake_pulumi, fake_gcloud, tmp_path):
    journal = tmp_path / "journal.jsonl"

    def say(message: str, at: float) -> None:
        with journal.open("a") as out:
            out.write(json.dumps({"t": int(at), "m": message}) + "\n")

    say("first: weights loading", time.time() - 30)
    vm.set(sshd=True)
    env = vm.env(fake_pulumi, fake_gcloud, GCLOUD_STANDIN_JOURNAL=str(journal))
    logs = subprocess.Popen([sys.executable, "-m", "gemma4_t4", "logs", "-s", "gce-t4", "--follow"], cwd=REPO, env=env,
                            text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out: list[str] = []
    threading.Thread(target=lambda: out.extend(iter(logs.stdout.readline, "")), daemon=True).start()

    def until(text: str) -> None:
        deadline = time.monotonic() + 60
        while not any(text in line for line in out):
            assert time.monotonic() < deadline and logs.poll() is None, (out, vm.log())
            time.sleep(0.05)

    try:
        until("first: weights loading")
        say("second: before the reboot", time.time() - 1)
        until("second: before the reboot")
        vm.set(sshd=False, boot=1)
        until("-- gemma4-t4: no connection to the VM")
        say("third: after the reboot", time.time() + 1)
        vm.until(lambda log: refusals(log) >= 1)
        vm.set(sshd=True)
        until("third: after the reboot")
        logs.send_signal(signal.SIGINT)
        _, err = logs.communicate(timeout=60)
    finally:
        logs.kill()
    assert logs.returncode == 130, err
    lines = [line for line in out if "first:" in line or "third:" in line or "-- gemma4-t4" in line]
    assert "first:" in lines[0] and "third:" in lines[-1], out
    assert sum("first:" in line for line in out) == 1, "the reconnection starts where it dropped, not at -n"
