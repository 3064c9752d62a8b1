#!/usr/bin/python3
"""Stop the VM once vLLM has served no request for IDLE_STOP_MINUTES (a timer runs this each minute).

Activity is read from vLLM's own /metrics: a request in flight or waiting, or a change in the
finished-request counter, restarts the clock. A server that does not answer (starting, or
restarting) is never "idle": the clock restarts too. Stopping keeps both disks; billing for the
VM and its GPU ends until someone starts it again.
"""

from __future__ import annotations

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


def _sum(metrics_text: str, names: tuple[str, ...]) -> float | None:
    values = [float(line.rsplit(" ", 1)[1]) for line in metrics_text.splitlines()
              if line.split("{", 1)[0].split(" ", 1)[0] in names]
    return sum(values) if values else None


def decide(state: dict, metrics_text: str | None, now: float, idle_minutes: int) -> tuple[dict, bool, str]:
    """(new state, stop?, why) from the last state and this minute's /metrics (None: no answer)."""
    finished = None if metrics_text is None else _sum(metrics_text, FINISHED)
    in_flight = None if metrics_text is None else _sum(metrics_text, IN_FLIGHT)
    if finished is None or in_flight is None:
        return {"last_active": now, "finished": None}, False, "vLLM is not answering /metrics: not idle"
    active = in_flight > 0 or state.get("finished") != finished or "last_active" not in state
    last_active = now if active else state["last_active"]
    idle_s = now - last_active
    stop = idle_s >= idle_minutes * 60
    return {"last_active": last_active, "finished": finished}, stop, f"idle {idle_s / 60:.1f} of {idle_minutes} min"


def _fetch(url: str) -> str | None:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.read().decode()
    except OSError:
        return None


def main() -> int:
    idle_minutes = int(os.environ.get("IDLE_STOP_MINUTES", "0"))
    if idle_minutes <= 0:
        return 0
    state_file = os.environ.get("IDLE_STATE_FILE", STATE_FILE)
    try:
        with open(state_file) as f:
            state = json.load(f)
    except (OSError, ValueError):
        state = {}
    state, stop, why = decide(state, _fetch(os.environ["METRICS_URL"]), time.time(), idle_minutes)
    os.makedirs(os.path.dirname(state_file), exist_ok=True)
    with open(state_file, "w") as f:
        json.dump(state, f)
    print(f"idle-stop: {why}")
    if stop:
        print("idle-stop: no request served for the idle window: stopping the VM (the disks stay)")
        return subprocess.call(["systemctl", "poweroff"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
