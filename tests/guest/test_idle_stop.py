"""The guest's idle stop on recorded vLLM /metrics (the same logic meets the real server in
test_operator_cli.py), its health bound, and the real script run against stand-ins: a vLLM that never
answers (a closed port: connection refused, as before vLLM binds it) and a `systemctl` that records the
poweroff it is asked for."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time

import pytest
from conftest import REPO, free_port

from gemma4_t4 import catalog
from gemma4_t4.components.gce import guest

SCRIPT = REPO / "cloudinit" / "scripts" / "idle_stop.py"
BOUND = 60  # minutes: the cap
STALL = 20  # minutes without progress
START = 1000.0  # the boot's window opened here
PROGRESS = (True, "a stand-in's progress")
NONE = (False, "no new phase, no CPU work, no download")


@pytest.fixture(scope="module")
def idle():
    spec = importlib.util.spec_from_file_location("idle_stop", SCRIPT)
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


def decide(idle, state, text, now, idle_minutes=30, progress=PROGRESS):
    return idle.decide(state, text, now, idle_minutes, window_started=START, bound_minutes=BOUND,
                       stall_minutes=STALL, progress=progress)


def test_idle_for_the_window_stops(idle):
    state, stop, _ = decide(idle, {}, metrics(3, 12), now=START)
    assert not stop and state == {"last_active": START, "finished": 15.0, "answered": True, "last_progress": START}
    state, stop, why = decide(idle, state, metrics(3, 12), now=START + 29 * 60)
    assert not stop and "idle 29.0 of 30 min" in why
    _, stop, _ = decide(idle, state, metrics(3, 12), now=START + 30 * 60)
    assert stop


def test_a_finished_request_or_one_in_flight_restarts_the_clock(idle):
    state = {"last_active": 0.0, "finished": 15.0, "answered": True}
    new, stop, _ = decide(idle, state, metrics(3, 13), now=5000.0, idle_minutes=5)
    assert not stop and new["last_active"] == 5000.0
    new, stop, _ = decide(idle, state, metrics(3, 12, running=1), now=5000.0, idle_minutes=5)
    assert not stop and new["last_active"] == 5000.0
    new, stop, _ = decide(idle, state, metrics(3, 12, waiting=2), now=5000.0, idle_minutes=5)
    assert not stop


def test_a_booting_server_is_never_stopped_before_the_bound(idle):
    """Every minute of the bound without an answer: booting, never idle, whatever the idle window."""
    state: dict = {}
    for minute in range(BOUND):
        state, stop, why = decide(idle, state, None, now=START + minute * 60, idle_minutes=5)
        assert not stop, why
        assert "booting" in why and state["last_active"] == START + minute * 60
    _, stop, _ = decide(idle, state, "# no vllm metrics here\n", now=START + (BOUND - 1) * 60 + 59, idle_minutes=5)
    assert not stop


def test_a_server_that_never_answered_stops_at_the_bound(idle):
    state: dict = {}
    for minute in range(BOUND):
        state, _, _ = decide(idle, state, None, now=START + minute * 60, idle_minutes=120)
    _, stop, why = decide(idle, state, None, now=START + BOUND * 60, idle_minutes=120)
    assert stop and f"has not answered /metrics, and the {BOUND} min since the boot's window began are past" in why


def test_a_boot_without_progress_stops_at_the_stall_bound_not_the_cap(idle):
    """A hung step (a download that never moves, apt waiting on a dead mirror): no new phase, no CPU, no bytes.
    Before the stall bound such a VM billed until the whole bound from its boot."""
    state, stop, _ = decide(idle, {}, None, now=START)
    for minute in range(1, STALL):
        state, stop, why = decide(idle, state, None, now=START + minute * 60, progress=NONE)
        assert not stop and f"last progress {minute:.1f} of {STALL} min ago" in why
    _, stop, why = decide(idle, state, None, now=START + STALL * 60, progress=NONE)
    assert stop and f"the boot made no progress in {STALL} min" in why


def test_a_slow_build_that_makes_progress_outlives_the_stall_bound_up_to_the_cap(idle):
    """A DKMS build of 50 min (reports say 60+) makes no new phase, but works: booting until the cap."""
    state: dict = {}
    for minute in range(BOUND):
        state, stop, why = decide(idle, state, None, now=START + minute * 60, progress=(minute % 5 == 0, "CPU"))
        assert not stop, why
    assert decide(idle, state, None, now=START + BOUND * 60)[1], "the cap holds whatever the progress"


def test_what_counts_as_progress(idle):
    sample = idle.Sample(reached=2, phase="driver", phase_at=START, cpu_us={"gemma4-t4-provision.service": 50_000_000},
                         rx_bytes=10)
    now = START + 150
    assert idle.progressed({}, sample, 5, 10**6, now) == (True, "a new phase (driver)")
    last = {"reached": 2, "cpu_us": {"gemma4-t4-provision.service": 47_000_000}, "rx_bytes": 10, "checked_at": now - 60}
    assert idle.progressed(last, sample, 5, 10**6, now) == (False, "no new phase, no CPU work, no download")
    assert idle.progressed({**last, "cpu_us": {"gemma4-t4-provision.service": 44_000_000}}, sample, 5, 10**6,
                           now) == (True, "6 s of CPU in driver, 2.5 min into it")
    # A unit started again has a new cgroup: its 6 s are all new, though less than before.
    restarted = idle.Sample(2, "loading", None, {"gemma4-vllm.service": 6_000_000}, 10)
    assert idle.progressed({**last, "cpu_us": {"gemma4-vllm.service": 90_000_000}}, restarted, 5, 10**6, now)[0]
    downloading = idle.Sample(2, "model-download", START, {}, 10 + 2 * 10**6)
    assert idle.progressed(last, downloading, 5, 10**6, now) == (True, "2 MB received in model-download, 2.5 min into it")
    # The least CPU a minute counts for the time since the last check: 3 s in 15 s is progress, 3 s in 60 s not.
    assert idle.progressed({**last, "checked_at": now - 15}, sample, 5, 10**6, now)[0]
    assert not idle.progressed({**last, "checked_at": now - 60}, sample, 5, 10**6, now)[0]
    # A retry loop works and downloads, and is no progress; nor is a failure.
    for phase in ("retrying", "failed"):
        busy = idle.Sample(3, phase, START, {"gemma4-t4-provision.service": 99_000_000}, 10**9)
        assert idle.progressed(last, busy, 5, 10**6, now)[0] is False


def test_a_vllm_crash_loop_is_no_progress_but_provisioning_after_a_retry_is(idle):
    """vLLM started again since the last new phase: its CPU (imports, loads at every start) no longer counts, so a
    crash loop reaches the stall bound; provisioning's CPU after a retried mirror blip (a DKMS build) still does."""
    now = START + 300
    last = {"reached": 5, "vllm_retries_at_phase": 1, "checked_at": now - 60,
            "cpu_us": {"gemma4-vllm.service": 1_000_000, "gemma4-t4-provision.service": 1_000_000}, "rx_bytes": 0}
    loop = idle.Sample(5, "loading", START, {"gemma4-vllm.service": 40_000_000}, 0, vllm_retries=3)
    assert idle.progressed(last, loop, 5, 10**6, now) == (False, "no new phase, no CPU work, no download")
    first_start = loop._replace(vllm_retries=1)
    assert idle.progressed(last, first_start, 5, 10**6, now)[0], "before any restart, vLLM's load is progress"
    building = idle.Sample(5, "driver", START, {"gemma4-t4-provision.service": 40_000_000}, 0, vllm_retries=3)
    assert idle.progressed(last, building, 5, 10**6, now)[0]
    state: dict = {}
    for minute in range(STALL + 1):  # the loop through decide: stopped at the stall bound, long before the cap
        state, stop, why = decide(idle, state, None, now=START + minute * 60,
                                  progress=idle.progressed(last, loop, 5, 10**6, now) if minute else (True, "start"))
    assert stop and "made no progress" in why


def test_an_older_vllm_env_without_the_new_bounds_reads_the_catalogs(idle):
    assert str(catalog.HEALTH_STALL_MINUTES) == idle.STALL_MINUTES_DEFAULT
    assert float(idle.PROGRESS_CPU_S_DEFAULT) == catalog.PROGRESS_CPU_S
    assert int(idle.PROGRESS_RX_BYTES_DEFAULT) == catalog.PROGRESS_RX_BYTES


def test_the_sample_reads_the_phase_record_the_cgroups_and_the_network(idle, tmp_path, monkeypatch):
    (tmp_path / "phase.json").write_text(json.dumps({"phase": "driver", "history": [
        ["provision", 1], ["driver", 2], ["retrying", 3], ["provision", 4], ["driver", 5]]}))
    vllm_loop = {"phase": "retrying", "history": [["provision", 1], ["loading", 2], ["retrying", 3], ["loading", 4],
                                                  ["retrying", 5]]}
    unit = tmp_path / "cg" / "gemma4-t4-provision.service"
    unit.mkdir(parents=True)
    (unit / "cpu.stat").write_text("usage_usec 1234567\nuser_usec 1000000\nsystem_usec 234567\n")
    for iface, rx in (("lo", 99), ("eth0", 1000), ("host0", 24)):
        (tmp_path / "net" / iface / "statistics").mkdir(parents=True)
        (tmp_path / "net" / iface / "statistics" / "rx_bytes").write_text(f"{rx}\n")
    monkeypatch.setenv("IDLE_PHASE_FILE", str(tmp_path / "phase.json"))
    monkeypatch.setenv("IDLE_CGROUP_ROOT", str(tmp_path / "cg"))
    monkeypatch.setenv("IDLE_NET_ROOT", str(tmp_path / "net"))
    assert idle.read_sample() == idle.Sample(2, "driver", 5.0, {"gemma4-t4-provision.service": 1234567}, 1024, 0)
    (tmp_path / "phase.json").write_text(json.dumps(vllm_loop))
    assert idle.read_sample().vllm_retries == 2, "a provisioning retry is not vLLM's"


def test_past_the_bound_a_server_that_answered_before_lets_the_idle_clock_run(idle):
    """Not answering once past the bound counts as idle: a crash loop after serving does not bill forever,
    and it does not restart the clock."""
    state, _, _ = decide(idle, {}, metrics(3, 12), now=START + 10 * 60, idle_minutes=60)
    state, stop, _ = decide(idle, state, None, now=START + 30 * 60, idle_minutes=60)  # within the bound: a restart
    assert not stop and state["last_active"] == START + 30 * 60 and state["answered"]
    state, stop, why = decide(idle, state, None, now=START + (BOUND + 1) * 60, idle_minutes=60)
    assert not stop and "idle 31.0 of 60 min" in why and state["last_active"] == START + 30 * 60
    _, stop, why = decide(idle, state, None, now=START + 90 * 60, idle_minutes=60)
    assert stop and "idle 60.0 of 60 min" in why


def test_the_clock_starts_anew_at_every_boot(idle):
    assert idle.STATE_FILE.startswith("/run/"), "a clock kept across boots stops a restarted VM at its first tick"
    assert not idle.WINDOW_FILE.startswith("/run/"), "the driver's reboot must find the first boot's window"


# --- the boot's window --------------------------------------------------------------------------------


def test_every_boot_gets_a_window_of_its_own_but_the_driver_reboot(idle):
    first = idle.boot_window({}, {}, "boot-1", now=START)
    assert first == {"boot_id": "boot-1", "started": START}
    assert idle.boot_window(first, {}, "boot-1", now=START + 3000) == first  # the same boot: the same window
    # The driver's reboot (marked by provision.sh a minute before): the first boot's window goes on.
    carried = idle.boot_window(first, {"boot_id": "boot-1", "at": START + 600}, "boot-2", now=START + 700)
    assert carried == {"boot_id": "boot-2", "started": START}
    # Stopped, then started again: no mark, a fresh window.
    assert idle.boot_window(carried, {}, "boot-3", now=START + 9000) == {"boot_id": "boot-3", "started": START + 9000}
    # A mark left by a reboot that never came back in time (the VM was stopped meanwhile): a fresh window.
    late = idle.boot_window(first, {"boot_id": "boot-1", "at": START}, "boot-2", now=START + idle.CARRY_MAX_S + 1)
    assert late["started"] == START + idle.CARRY_MAX_S + 1
    # A mark of another boot than the window's carries nothing.
    assert idle.boot_window(first, {"boot_id": "boot-0", "at": START}, "boot-2", now=START + 60)["started"] == START + 60


# --- the real script, against stand-ins -------------------------------------------------------------


@pytest.fixture
def vm(tmp_path):
    """The script's files under tmp_path, a boot id, a vLLM that never answers, and a systemctl that records."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "systemctl-calls"
    (bin_dir / "systemctl").write_text(f'#!/bin/sh\necho "$@" >> {calls}\n')
    (bin_dir / "systemctl").chmod(0o755)
    boot_id = tmp_path / "boot_id"
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
           "IDLE_STATE_FILE": str(tmp_path / "run" / "idle-state.json"),
           "IDLE_WINDOW_FILE": str(tmp_path / "var" / "health-window.json"),
           "IDLE_CARRY_FILE": str(tmp_path / "var" / "health-window-carry.json"),
           "IDLE_BOOT_ID_FILE": str(boot_id),
           "IDLE_PHASE_FILE": str(tmp_path / "var" / "phase.json"),
           "IDLE_CGROUP_ROOT": str(tmp_path / "cgroup"), "IDLE_NET_ROOT": str(tmp_path / "net"),
           "IDLE_STOP_MINUTES": "60", "HEALTH_BOUND_MINUTES": str(BOUND), "HEALTH_STALL_MINUTES": str(STALL),
           "PROGRESS_CPU_S": "5", "PROGRESS_RX_BYTES": "1000000",
           # Nothing listens there: connection refused, as before vLLM binds its port.
           "METRICS_URL": f"http://127.0.0.1:{free_port()}/metrics"}

    class Vm:
        def boot(self, boot: str) -> None:
            boot_id.write_text(f"{boot}\n")
            (tmp_path / "run" / "idle-state.json").unlink(missing_ok=True)  # /run is empty at every boot

        def run(self, *args: str) -> str:
            done = subprocess.run([sys.executable, str(SCRIPT), *args], env=env, capture_output=True, text=True,
                                  timeout=60)
            assert done.returncode == 0, done.stderr
            return done.stdout

        def window(self) -> dict:
            return json.loads((tmp_path / "var" / "health-window.json").read_text())

        def window_opened_minutes_ago(self, minutes: float) -> None:
            """What the boot's first check wrote, MINUTES before now."""
            window = self.window()
            (tmp_path / "var" / "health-window.json").write_text(
                json.dumps({**window, "started": time.time() - minutes * 60}))

        def poweroffs(self) -> list[str]:
            return calls.read_text().splitlines() if calls.exists() else []

    return Vm()


def test_the_script_stops_a_vm_never_healthy_after_the_bound_and_not_before(vm):
    vm.boot("boot-1")
    assert "booting, not idle" in vm.run() and vm.poweroffs() == []
    vm.window_opened_minutes_ago(BOUND - 1)
    assert "booting, not idle" in vm.run() and vm.poweroffs() == []
    vm.window_opened_minutes_ago(BOUND + 0.1)
    out = vm.run()
    assert "has not answered /metrics" in out and vm.poweroffs() == ["poweroff"]


def test_the_driver_reboot_continues_the_window_and_a_start_after_a_stop_opens_a_new_one(vm):
    vm.boot("boot-1")
    vm.run()
    vm.window_opened_minutes_ago(BOUND - 5)
    assert "continues this boot's health window" in vm.run("carry")
    vm.boot("boot-2")  # provision.sh's driver reboot
    vm.run()
    vm.window_opened_minutes_ago(BOUND + 0.1)  # the first boot's window, now past the bound
    vm.run()
    assert vm.poweroffs() == ["poweroff"]
    vm.boot("boot-3")  # started again after the stop: a fresh window, no stop before the bound
    assert "booting, not idle" in vm.run()
    assert vm.window()["boot_id"] == "boot-3" and time.time() - vm.window()["started"] < 60
    assert vm.poweroffs() == ["poweroff"]


def test_idle_stop_off_checks_nothing(vm):
    vm.boot("boot-1")
    done = subprocess.run([sys.executable, str(SCRIPT)], env={**os.environ, "IDLE_STOP_MINUTES": "0"},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout == "" and vm.poweroffs() == []


# --- how the guest runs it ----------------------------------------------------------------------------


def test_the_bounds_reach_the_guest_and_the_cap_grows_with_the_download():
    env = guest.vllm_env(["--model", "m"], 8000, 0)
    assert env["HEALTH_BOUND_MINUTES"] == str(catalog.HEALTH_BOUND_MINUTES)
    assert env["HEALTH_STALL_MINUTES"] == str(catalog.HEALTH_STALL_MINUTES)
    assert float(env["PROGRESS_CPU_S"]) == catalog.PROGRESS_CPU_S
    assert int(env["PROGRESS_RX_BYTES"]) == catalog.PROGRESS_RX_BYTES
    # 12 GB more than the default checkpoint at the worst 10 MB/s, with the margin: 25 more minutes.
    from gemma4_t4.catalog import first_boot
    bigger = guest.vllm_env(["--model", "m"], 8000, first_boot.DEFAULT_CHECKPOINT_BYTES + 12_000_000_000)
    assert bigger["HEALTH_BOUND_MINUTES"] == str(catalog.HEALTH_BOUND_MINUTES + 25)


def test_one_derivation_gives_every_bound_and_none_cuts_a_first_boot_short():
    """wait's default, the idle stop's cap and provisioning's start timeout all come from the first boot's parts:
    none is shorter than the slowest first boot the parts allow (45 min, 60 min and 1 h were each below
    a 60-minute DKMS build)."""
    from gemma4_t4.catalog import first_boot
    from gemma4_t4.core import ops
    worst_s = sum(part.worst_s for part in catalog.FIRST_BOOT)
    provisioning_worst_s = sum(part.worst_s for part in catalog.FIRST_BOOT if part.provisioning)
    assert worst_s <= catalog.HEALTH_BOUND_MINUTES * 60 and worst_s <= ops.WAIT_TIMEOUT_S
    assert ops.WAIT_TIMEOUT_S == catalog.HEALTH_BOUND_MINUTES * 60, "wait never gives up before the guest would"
    assert provisioning_worst_s <= catalog.PROVISION_TIMEOUT_MINUTES * 60
    dkms = next(part for part in catalog.FIRST_BOOT if "DKMS" in part.name)
    assert dkms.worst_s >= 3600 and "open-gpu-kernel-modules#1256" in dkms.source
    unit = (REPO / "cloudinit" / "units" / "gemma4-t4-provision.service").read_text()
    assert f"\nTimeoutStartSec={catalog.PROVISION_TIMEOUT_MINUTES}min\n" in unit
    # A stall is caught long before the cap; the stall bound outlasts the quietest working stretch (the reboot).
    reboot = next(part for part in catalog.FIRST_BOOT if "reboot" in part.name)
    assert reboot.worst_s < catalog.HEALTH_STALL_MINUTES * 60 < catalog.HEALTH_BOUND_MINUTES * 60
    assert (sum(p.low_s for p in first_boot.FIRST_BOOT),
            sum(p.high_s for p in first_boot.FIRST_BOOT)) == catalog.GCE_FIRST_BOOT_SERIAL_S


def test_a_first_boot_takes_its_longest_chain_with_the_network_beside_the_driver():
    """Provisioning overlaps the downloads with the driver's build: the range `plan` quotes is the longest
    chain through the parts' needs, as provision.sh orders them (the wheels beside the DKMS build, the checkpoint and
    the fit check after the wheels, the reboot after every one of them), shorter than their sum."""
    from gemma4_t4.catalog import first_boot
    parts = {part.key: part for part in catalog.FIRST_BOOT}
    assert all(need in parts for part in parts.values() for need in part.needs)
    assert parts["wheels"].needs == parts["dkms"].needs == ("setup",)
    assert set(parts["reboot"].needs) == {"dkms", "model", "fit"} and parts["model"].needs == ("wheels",)
    assert parts["model"].provisioning and parts["fit"].provisioning, "both now run in provisioning"
    low, high = catalog.GCE_FIRST_BOOT_S
    assert (low, high) == (first_boot.longest_chain("low_s")[0], first_boot.longest_chain("high_s")[0])
    assert high < catalog.GCE_FIRST_BOOT_SERIAL_S[1] and low < catalog.GCE_FIRST_BOOT_SERIAL_S[0]
    # The slow end: setup, a 15-minute build, the reboot, vLLM's start and first compile; the downloads are off it.
    assert first_boot.longest_chain("high_s")[1] == ("setup", "dkms", "reboot", "start", "compile")


def test_the_check_runs_while_provisioning_does_and_provisioning_marks_its_reboot():
    unit = (REPO / "cloudinit" / "units" / "gemma4-t4-idle-stop.service").read_text()
    # Ordered after vLLM, the check would wait for provisioning (vLLM's start waits on it) and the window would
    # open only once provisioning ended, or never when it hangs.
    after = [word for line in unit.splitlines() if line.startswith("After=") for word in line[6:].split()]
    assert after == ["gemma4-t4-serving-config.service"]
    provision = (REPO / "cloudinit" / "scripts" / "provision.sh").read_text()
    carry, reboot = provision.index('idle_stop.py" carry'), provision.index("systemctl reboot")
    assert carry < reboot
