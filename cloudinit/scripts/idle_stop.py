#!/usr/bin/python3
"""Stop the VM once vLLM has served no request for IDLE_STOP_MINUTES, or when a boot whose vLLM never answered
is stuck (HEALTH_STALL_MINUTES without progress) or has run past its cap (HEALTH_BOUND_MINUTES). A timer runs
this each minute.

    idle_stop.py          one check (the timer's)
    idle_stop.py carry    before provisioning's driver reboot: the next boot continues this boot's window

Activity is read from vLLM's own /metrics: a request in flight or waiting, or a change in the
finished-request counter, restarts the clock. A server that does not answer is booting (the driver,
the venv, the download, the compile) as long as the boot makes progress: a phase it had not reached before
(guest_attributes.py's record; a retry or a failure is no progress), CPU work in the provisioning or vLLM unit
(a DKMS build, pip, vLLM's load), or a download (bytes received). A boot without progress for the stall bound is
stuck, and stops; one that keeps making progress runs up to the cap (catalog/first_boot.py derives both from a
first boot's parts). Past either, a VM whose vLLM never answered this boot stops at once (it would bill ~$0.52/h
forever), one that answered before lets the idle clock run. Stopping keeps both disks; billing for the VM and
its GPU ends until someone starts it again.

The cap counts from the boot's window: the first check of a boot opens one, kept on the boot disk
(WINDOW_FILE) under the kernel's boot id. Every boot gets a fresh window (a VM started again after a stop
is booting again), except the one reboot provisioning makes to load the NVIDIA driver: `carry` marks it,
and the boot after it continues the first boot's window, so the first boot's cap covers the whole of it.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import subprocess
import sys
import time
import urllib.request
from typing import NamedTuple

FINISHED = ("vllm:request_success_total",)
IN_FLIGHT = ("vllm:num_requests_running", "vllm:num_requests_waiting")
# Under /run, so every boot starts a new clock: kept on disk, a VM started again after an idle
# stop would read the old clock on its first tick and power off before serving anyone.
STATE_FILE = "/run/gemma4-t4/idle-state.json"
# On the boot disk: the driver's reboot continues the window the first boot opened.
WINDOW_FILE = "/var/lib/gemma4-t4/health-window.json"
CARRY_FILE = "/var/lib/gemma4-t4/health-window-carry.json"
BOOT_ID_FILE = "/proc/sys/kernel/random/boot_id"
# A planned reboot is back within minutes (the driver reboot: 1-2 min, docs/gce-guest.md); a boot that comes
# later than this after the mark is a start of its own (the VM was stopped meanwhile) and gets a fresh window.
CARRY_MAX_S = 15 * 60
# guest_attributes.py's record of the boot's phases, and the phases that are no progress.
PHASE_FILE = "/var/lib/gemma4-t4/phase.json"
NO_PROGRESS = ("retrying", "failed", "update")
VLLM_PHASES = ("model-download", "loading", "serving")  # progress.py's phases of vLLM's start
# The units whose CPU time is the boot's work (cgroup v2: each unit's cpu.stat, usage_usec).
VLLM_UNIT = "gemma4-vllm.service"
WORK_UNITS = ("gemma4-t4-provision.service", VLLM_UNIT)
CGROUP_ROOT = "/sys/fs/cgroup/system.slice"
NET_ROOT = "/sys/class/net"
# catalog/first_boot.py's HEALTH_STALL_MINUTES, PROGRESS_CPU_S and PROGRESS_RX_BYTES (tests/guest/test_idle_stop.py
# holds them equal), for a vllm.env that does not name them yet.
STALL_MINUTES_DEFAULT, PROGRESS_CPU_S_DEFAULT, PROGRESS_RX_BYTES_DEFAULT = "20", "5", "1000000"


class Sample(NamedTuple):
    """What the guest shows of its own progress at one check."""
    reached: int  # the phases this boot's history has reached, retries and failures not counted
    phase: str | None  # the phase now
    phase_at: float | None  # when it began
    cpu_us: dict[str, int]  # CPU time so far in each work unit's cgroup (a unit not running: absent)
    rx_bytes: int  # bytes received so far on the VM's network interfaces (loopback not counted)
    vllm_retries: int = 0  # vLLM's restarts in this boot's history (a `retrying` right after one of VLLM_PHASES)


def progressed(state: dict, sample: Sample, cpu_s: float, rx_bytes: int, now: float) -> tuple[bool, str]:
    """(whether the boot made progress since the last check, which kind); CPU_S and RX_BYTES are the least CPU
    time and download a minute that count, for the time since the last check (a minute, on the timer)."""
    into = "" if sample.phase_at is None else f", {(now - sample.phase_at) / 60:.1f} min into it"
    share = max(now - state.get("checked_at", now - 60), 1.0) / 60
    if sample.phase in NO_PROGRESS:
        return False, f"the phase is {sample.phase}"
    if sample.reached > state.get("reached", 0):
        return True, f"a new phase ({sample.phase})"
    before = state.get("cpu_us", {})
    # Once vLLM has been started again since the last new phase, its CPU is no progress: a crash loop works (imports,
    # loads) at every start and would otherwise never let the stall bound pass. Provisioning's CPU counts (a build
    # after a retried mirror blip works), and so does a download.
    retried = sample.vllm_retries > state.get("vllm_retries_at_phase", sample.vllm_retries)
    # A unit started again has a new cgroup, counted from 0: all of its time is new.
    cpu_us = sum(used - before.get(unit, 0) if used >= before.get(unit, 0) else used
                 for unit, used in sample.cpu_us.items() if not (retried and unit == VLLM_UNIT))
    if cpu_us >= cpu_s * share * 1e6:
        return True, f"{cpu_us / 1e6:.0f} s of CPU in {sample.phase or 'the boot'}{into}"
    received = sample.rx_bytes - state.get("rx_bytes", sample.rx_bytes)
    if received >= rx_bytes * share:
        return True, f"{received / 1e6:.0f} MB received in {sample.phase or 'the boot'}{into}"
    return False, "no new phase, no CPU work, no download"


def _sum(metrics_text: str, names: tuple[str, ...]) -> float | None:
    values = [float(line.rsplit(" ", 1)[1]) for line in metrics_text.splitlines()
              if line.split("{", 1)[0].split(" ", 1)[0] in names]
    return sum(values) if values else None


def decide(state: dict, metrics_text: str | None, now: float, idle_minutes: int, window_started: float,
           bound_minutes: int, stall_minutes: int, progress: tuple[bool, str]) -> tuple[dict, bool, str]:
    """(new state, stop?, why) from the last state and this minute's /metrics (None: no answer); the boot's
    window began at WINDOW_STARTED; PROGRESS says whether the boot made progress since the last check. A vLLM that
    does not answer is booting while the boot made progress within STALL_MINUTES and is within BOUND_MINUTES of
    its window."""
    finished = None if metrics_text is None else _sum(metrics_text, FINISHED)
    in_flight = None if metrics_text is None else _sum(metrics_text, IN_FLIGHT)
    answered = bool(state.get("answered"))
    made, kind = progress
    last_progress = now if made or "last_progress" not in state else state["last_progress"]
    if finished is None or in_flight is None:
        booting_s, stalled_s = now - window_started, now - last_progress
        if booting_s < bound_minutes * 60 and stalled_s < stall_minutes * 60:
            return ({"last_active": now, "finished": None, "answered": answered, "last_progress": last_progress},
                    False, f"vLLM is not answering /metrics, {booting_s / 60:.1f} of {bound_minutes} min into the "
                    f"boot's window, last progress {stalled_s / 60:.1f} of {stall_minutes} min ago ({kind}): booting, "
                    "not idle")
        if not answered:
            why = (f"the boot made no progress in {stall_minutes} min ({kind})" if stalled_s >= stall_minutes * 60
                   else f"the {bound_minutes} min since the boot's window began are past")
            return ({**state, "finished": None, "last_progress": last_progress}, True,
                    f"vLLM has not answered /metrics, and {why}")
        last_active = state.get("last_active", window_started)
        idle_s = now - last_active
        return ({"last_active": last_active, "finished": None, "answered": True, "last_progress": last_progress},
                idle_s >= idle_minutes * 60, f"vLLM is not answering /metrics (past the boot's bounds): idle "
                f"{idle_s / 60:.1f} of {idle_minutes} min")
    active = in_flight > 0 or state.get("finished") != finished or "last_active" not in state
    last_active = now if active else state["last_active"]
    idle_s = now - last_active
    stop = idle_s >= idle_minutes * 60
    return ({"last_active": last_active, "finished": finished, "answered": True, "last_progress": last_progress},
            stop, f"idle {idle_s / 60:.1f} of {idle_minutes} min")


def boot_window(window: dict, carry: dict, boot_id: str, now: float) -> dict:
    """This boot's window {"boot_id", "started"}: the one already open for BOOT_ID; the last boot's, when that
    boot marked its reboot (``carry``) less than CARRY_MAX_S ago; else a new one from NOW."""
    if window.get("boot_id") == boot_id and "started" in window:
        return window
    carried = (carry.get("boot_id") is not None and carry.get("boot_id") == window.get("boot_id")
               and "started" in window and 0 <= now - carry.get("at", float("-inf")) <= CARRY_MAX_S)
    return {"boot_id": boot_id, "started": window["started"] if carried else now}


def _read_json(path: str) -> dict:
    try:
        with open(path) as f:
            value = json.load(f)
        return value if isinstance(value, dict) else {}
    except (OSError, ValueError):
        return {}


def _write_json(path: str, value: dict) -> None:
    """Written whole or not at all: a power-off between two writes leaves the old file."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    partial = f"{path}.{os.getpid()}"
    with open(partial, "w") as f:
        json.dump(value, f)
    os.replace(partial, path)


def _paths() -> tuple[str, str, str]:
    return (os.environ.get("IDLE_WINDOW_FILE", WINDOW_FILE), os.environ.get("IDLE_CARRY_FILE", CARRY_FILE),
            os.environ.get("IDLE_BOOT_ID_FILE", BOOT_ID_FILE))


def this_boots_window(now: float) -> dict:
    """The window of this boot, opened (and the last boot's carry mark used up) on its first call."""
    window_file, carry_file, boot_id_file = _paths()
    with open(boot_id_file) as f:
        boot_id = f.read().strip()
    window = _read_json(window_file)
    current = boot_window(window, _read_json(carry_file), boot_id, now)
    if current != window:
        _write_json(window_file, current)
        with contextlib.suppress(FileNotFoundError):
            os.remove(carry_file)
    return current


def carry(now: float) -> int:
    """Mark this boot's reboot as part of its window (provision.sh, just before the driver reboot)."""
    window = this_boots_window(now)
    _write_json(_paths()[1], {"boot_id": window["boot_id"], "at": now})
    print(f"idle-stop: the next boot continues this boot's health window (opened {now - window['started']:.0f} s ago)")
    return 0


def read_sample() -> Sample:
    """This check's Sample, from the phase record, the work units' cgroups and the network's counters (each
    path overridable for the tests)."""
    record = _read_json(os.environ.get("IDLE_PHASE_FILE", PHASE_FILE))
    history = record.get("history")
    entries = [entry for entry in history if isinstance(entry, list) and len(entry) == 2] \
        if isinstance(history, list) else []
    reached = len({phase for phase, _ in entries if phase not in NO_PROGRESS})
    vllm_retries = sum(1 for (prior, _), (phase, _) in itertools.pairwise(entries)
                       if phase == "retrying" and prior in VLLM_PHASES)
    cgroups = os.environ.get("IDLE_CGROUP_ROOT", CGROUP_ROOT)
    cpu_us = {}
    for unit in WORK_UNITS:
        with contextlib.suppress(OSError, ValueError), open(os.path.join(cgroups, unit, "cpu.stat")) as f:
            cpu_us[unit] = next(int(line.split()[1]) for line in f if line.startswith("usage_usec "))
    net = os.environ.get("IDLE_NET_ROOT", NET_ROOT)
    rx_bytes = 0
    with contextlib.suppress(OSError):
        for iface in os.listdir(net):
            if iface != "lo":
                with contextlib.suppress(OSError, ValueError), open(os.path.join(net, iface, "statistics",
                                                                                  "rx_bytes")) as f:
                    rx_bytes += int(f.read())
    phase_at = float(entries[-1][1]) if entries else None
    return Sample(reached, record.get("phase"), phase_at, cpu_us, rx_bytes, vllm_retries)


def _fetch(url: str) -> str | None:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.read().decode()
    except OSError:
        return None


def main(argv: list[str]) -> int:
    if argv[1:] == ["carry"]:
        return carry(time.time())
    idle_minutes = int(os.environ.get("IDLE_STOP_MINUTES", "0"))
    if idle_minutes <= 0:
        return 0
    bound_minutes = int(os.environ["HEALTH_BOUND_MINUTES"])
    # A vllm.env an older release wrote has no stall bound or progress floors until the new serving value lands
    # (the guest applies the bundle, then the serving value): these defaults are the catalog's (first_boot.py).
    stall_minutes = int(os.environ.get("HEALTH_STALL_MINUTES", STALL_MINUTES_DEFAULT))
    now = time.time()
    window = this_boots_window(now)
    state_file = os.environ.get("IDLE_STATE_FILE", STATE_FILE)
    last = _read_json(state_file)
    sample = read_sample()
    progress = progressed(last, sample, float(os.environ.get("PROGRESS_CPU_S", PROGRESS_CPU_S_DEFAULT)),
                          int(os.environ.get("PROGRESS_RX_BYTES", PROGRESS_RX_BYTES_DEFAULT)), now)
    state, stop, why = decide(last, _fetch(os.environ["METRICS_URL"]), now, idle_minutes, window["started"],
                              bound_minutes, stall_minutes, progress)
    new_phase = sample.reached > last.get("reached", 0)
    _write_json(state_file, {**state, "reached": max(sample.reached, last.get("reached", 0)),
                             "vllm_retries_at_phase": sample.vllm_retries if new_phase else last.get(
                                 "vllm_retries_at_phase", sample.vllm_retries),
                             "cpu_us": sample.cpu_us, "rx_bytes": sample.rx_bytes, "checked_at": now})
    print(f"idle-stop: {why}")
    if stop:
        print("idle-stop: stopping the VM (the disks stay; `gemma4-t4 start` or `gcloud compute instances start` "
              "starts it again, with a fresh window)")
        return subprocess.call(["systemctl", "poweroff"])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
