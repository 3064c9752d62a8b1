#!/usr/bin/python3
"""The boot's phase, for a person to follow without SSH: recorded here, published as GCE guest attributes.

    guest_attributes.py phase PHASE [DETAIL]     record that PHASE began now (DETAIL: one line about it)
    guest_attributes.py detail DETAIL            a new detail line for the current phase

Recording never fails a caller (a step of provision.sh) and never waits on the network: it writes the state
file. gemma4-t4-progress.service publishes the state (publish()), at most PUTS_PER_MINUTE values a minute.

Guest attributes (Google's "Setting and querying guest attributes",
https://cloud.google.com/compute/docs/metadata/manage-guest-attributes): the VM writes
instance/guest-attributes/NAMESPACE/KEY on its metadata server with a PUT and the header
`Metadata-Flavor: Google`, once the instance's metadata has enable-guest-attributes=TRUE (the GCE
component sets it); they are read from outside through instances.getGuestAttributes. They are meant for
small, infrequent values: at most 10 queries a minute and bursts of 3 a second per VM, above which
Compute Engine may drop values being written. Keys in the gemma4-t4 namespace (docs/gce-guest.md):
phase, detail, and history ("PHASE@EPOCH_SECONDS ...", oldest first).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

# update: a new guest bundle is being applied on the running VM (guest_bundle.py);
# retrying: a step failed and the guest tries it again by itself (a mirror blip, a Hub throttle, vLLM's restart);
# failed: the guest stopped at a failure it does not retry (a person must act: the detail says what).
PHASES = ("provision", "driver", "reboot", "vllm-install", "model-download", "loading", "serving", "update",
          "retrying", "failed")
NAMESPACE = "gemma4-t4"
URL = f"http://metadata.google.internal/computeMetadata/v1/instance/guest-attributes/{NAMESPACE}/"
# On the boot disk: the driver's reboot continues the history that the first boot began.
STATE_FILE = os.environ.get("GEMMA4_T4_PHASE_STATE", "/var/lib/gemma4-t4/phase.json")
DETAIL_MAX = 300
# A VM that keeps failing and retrying adds entries without end: the history keeps its first HISTORY_HEAD
# (how the boot began) and its latest, HISTORY_MAX in all.
HISTORY_MAX = 40
HISTORY_HEAD = 8
# Below the documented 10 a minute: cloud-init and the guest agent write host keys there too.
PUTS_PER_MINUTE = 8
PUT_SPACING_S = 0.5  # a burst of at most 3 a second
# A detail alone (a download's bytes) at most this often, so a new phase always finds room in the minute.
DETAIL_EVERY_S = 30


@contextlib.contextmanager
def _locked_state() -> Iterator[dict]:
    """The state, read and written back under an exclusive lock (provision.sh and the progress unit both write)."""
    os.makedirs(os.path.dirname(STATE_FILE), exist_ok=True)
    with open(STATE_FILE + ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            with open(STATE_FILE) as f:
                state = json.load(f)
        except (OSError, ValueError):
            state = {}
        before = json.dumps(state, sort_keys=True)
        yield state
        if json.dumps(state, sort_keys=True) != before:
            partial = f"{STATE_FILE}.{os.getpid()}"
            with open(partial, "w") as f:
                json.dump(state, f)
            os.replace(partial, STATE_FILE)


def one_line(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= DETAIL_MAX else line[:DETAIL_MAX - 3] + "..."


def record_phase(state: dict, phase: str, detail: str, now: float) -> None:
    """PHASE began at NOW. Provisioning again after the VM served (a later boot) starts a new history, unless an
    update in place began it: the progress unit may say `serving` (the old vLLM still answers) between the bundle's
    `update` and provisioning's start, and that update's history goes on. A phase that is already the current one
    only gets the new detail."""
    if phase not in PHASES:
        raise ValueError(f"unknown phase {phase!r}: one of {', '.join(PHASES)}")
    history = state.setdefault("history", [])
    served = [entry[0] for entry in history[-2:]]
    if phase == "provision" and served[-1:] == ["serving"] and served != ["update", "serving"]:
        history.clear()
    if not history or history[-1][0] != phase:
        history.append([phase, int(now)])
        del history[HISTORY_HEAD:max(HISTORY_HEAD, len(history) - (HISTORY_MAX - HISTORY_HEAD))]
    state["phase"], state["detail"] = phase, one_line(detail)


def attributes(state: dict) -> dict[str, str]:
    """The guest attributes the state stands for."""
    if not state.get("phase"):
        return {}
    return {"phase": state["phase"], "detail": state.get("detail", ""),
            "history": " ".join(f"{phase}@{at}" for phase, at in state.get("history", []))}


def _put(key: str, value: str, timeout: float = 3) -> bool:
    request = urllib.request.Request(URL + key, data=value.encode(), method="PUT",
                                     headers={"Metadata-Flavor": "Google", "Content-Type": "text/plain"})
    try:
        with urllib.request.urlopen(request, timeout=timeout):
            return True
    except (urllib.error.URLError, OSError) as error:
        # Best effort: a VM whose guest attributes are off (403) or a metadata server that does not answer
        # costs the progress display, never the boot.
        print(f"guest-attributes: could not write {NAMESPACE}/{key}: {error}", file=sys.stderr)
        return False


def due(published: dict[str, str], wanted: dict[str, str], put_times: list[float], now: float) -> list[str]:
    """The keys to write now: those that changed, when the last minute's writes leave room for all of them
    (and, for a new detail alone, when the last write is DETAIL_EVERY_S old)."""
    changed = [key for key, value in wanted.items() if published.get(key) != value]
    recent = [t for t in put_times if now - t < 60]
    if changed == ["detail"] and recent and now - max(recent) < DETAIL_EVERY_S:
        return []
    return changed if changed and len(recent) + len(changed) <= PUTS_PER_MINUTE else []


def publish(now: float) -> list[str]:
    """Write the attributes that changed since the last publication, within the rate; which were written."""
    with _locked_state() as state:
        wanted = attributes(state)
        published = state.setdefault("published", {})
        put_times = state.setdefault("put_times", [])
        keys = due(published, wanted, put_times, now)
        # history first: once phase reads "serving", the history already holds it.
        keys.sort(key=("history", "detail", "phase").index)
        written = []
        for key in keys:
            if written:
                time.sleep(PUT_SPACING_S)
            put_times.append(time.time())
            if _put(key, wanted[key]):
                published[key] = wanted[key]
                written.append(key)
        state["put_times"] = [t for t in put_times if now - t < 60]
    return written


def main(argv: list[str]) -> int:
    if len(argv) >= 2 and argv[0] == "phase":
        with _locked_state() as state:
            record_phase(state, argv[1], " ".join(argv[2:]), time.time())
    elif len(argv) >= 2 and argv[0] == "detail":
        with _locked_state() as state:
            if state.get("phase"):
                state["detail"] = one_line(" ".join(argv[1:]))
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
