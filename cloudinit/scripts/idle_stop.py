#!/usr/bin/python3
"""Stop the VM once vLLM has served no request for IDLE_STOP_MINUTES, or has not answered at all within
HEALTH_BOUND_MINUTES of the boot (a timer runs this each minute).

    idle_stop.py          one check (the timer's)
    idle_stop.py carry    before provisioning's driver reboot: the next boot continues this boot's window

Activity is read from vLLM's own /metrics: a request in flight or waiting, or a change in the
finished-request counter, restarts the clock. A server that does not answer is booting (the driver,
the venv, the download, the compile) until the health bound: within it the clock restarts, so a booting
VM is never stopped. Past the bound, not answering counts as idle: a VM whose vLLM never answered this
boot stops at once (it would bill ~$0.52/h forever), one that answered before lets the idle clock run.
Stopping keeps both disks; billing for the VM and its GPU ends until someone starts it again.

The bound counts from the boot's window: the first check of a boot opens one, kept on the boot disk
(WINDOW_FILE) under the kernel's boot id. Every boot gets a fresh window (a VM started again after a stop
is booting again), except the one reboot provisioning makes to load the NVIDIA driver: `carry` marks it,
and the boot after it continues the first boot's window, so the first boot's bound covers the whole of it.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
import urllib.request

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


def _sum(metrics_text: str, names: tuple[str, ...]) -> float | None:
    values = [float(line.rsplit(" ", 1)[1]) for line in metrics_text.splitlines()
              if line.split("{", 1)[0].split(" ", 1)[0] in names]
    return sum(values) if values else None


def decide(state: dict, metrics_text: str | None, now: float, idle_minutes: int, window_started: float,
           bound_minutes: int) -> tuple[dict, bool, str]:
    """(new state, stop?, why) from the last state and this minute's /metrics (None: no answer); the boot's
    window began at WINDOW_STARTED, and vLLM must have answered within BOUND_MINUTES of it."""
    finished = None if metrics_text is None else _sum(metrics_text, FINISHED)
    in_flight = None if metrics_text is None else _sum(metrics_text, IN_FLIGHT)
    answered = bool(state.get("answered"))
    if finished is None or in_flight is None:
        booting_s = now - window_started
        if booting_s < bound_minutes * 60:
            return ({"last_active": now, "finished": None, "answered": answered}, False,
                    f"vLLM is not answering /metrics, {booting_s / 60:.1f} of {bound_minutes} min into the boot's "
                    "window: booting, not idle")
        if not answered:
            return ({**state, "finished": None}, True,
                    f"vLLM has not answered /metrics in the {bound_minutes} min since the boot's window began")
        last_active = state.get("last_active", window_started)
        idle_s = now - last_active
        return ({"last_active": last_active, "finished": None, "answered": True}, idle_s >= idle_minutes * 60,
                f"vLLM is not answering /metrics (past the boot's {bound_minutes} min): idle {idle_s / 60:.1f} "
                f"of {idle_minutes} min")
    active = in_flight > 0 or state.get("finished") != finished or "last_active" not in state
    last_active = now if active else state["last_active"]
    idle_s = now - last_active
    stop = idle_s >= idle_minutes * 60
    return ({"last_active": last_active, "finished": finished, "answered": True}, stop,
            f"idle {idle_s / 60:.1f} of {idle_minutes} min")


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
    now = time.time()
    window = this_boots_window(now)
    state_file = os.environ.get("IDLE_STATE_FILE", STATE_FILE)
    state = _read_json(state_file)
    state, stop, why = decide(state, _fetch(os.environ["METRICS_URL"]), now, idle_minutes, window["started"],
                              bound_minutes)
    _write_json(state_file, state)
    print(f"idle-stop: {why}")
    if stop:
        print("idle-stop: stopping the VM (the disks stay; `gemma4-t4 start` or `gcloud compute instances start` "
              "starts it again, with a fresh window)")
        return subprocess.call(["systemctl", "poweroff"])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
