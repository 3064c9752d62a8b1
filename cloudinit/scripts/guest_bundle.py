#!/usr/bin/python3
"""The guest's files and settings from the VM's metadata key `user-data`, applied on the running VM.

    guest_bundle.py watch         gemma4-t4-guest-watch.service: apply the bundle as it stands, then each new one
    guest_bundle.py apply FILE    apply the bundle in FILE once (a person's, or a test's)

cloud-init applies user-data once per instance, on its first boot. Every later change (`pulumi up` with a new
idleStopMinutes, swapSizeGb or vllmVersion, or a release whose scripts, units or clamp changed) reaches the VM as
a new value of the same metadata key, updated in place (setMetadata), and lands here: the files it lists that
differ are written (atomically, each with its mode), the files the last bundle had and this one has not are
removed (a unit disabled first), systemd reloads, the bundle's units are enabled and started, a watcher whose
script or unit changed restarts, provisioning runs again (each of its steps checks before it acts: a new lock
installs a new venv beside the one serving, a new swap size makes the new swapfile before the old one goes), and
vLLM restarts only when something it runs from changed, once provisioning has run to its end after the change; a
guard's value alone (idle minutes) restarts nothing. The startup-script, which the provider replaces the VM for,
never changes with any of this: only a new machine replaces the VM.

What is still to do (provisioning to run again, vLLM to restart after it) is kept on the boot disk (PENDING) and
done from the watch loop, never waited for inside it: a provisioning run under way finishes first (stopping it in
the driver's build would cost that build), one that keeps failing does not stop the next bundle from landing, and
one that stopped for good (exit 3) restarts vLLM once a person has run it again.

Each apply is reported as the phase `update` (its detail: the files that changed), and applying the same bundle
twice changes nothing. The metadata server is watched as serving_config.py watches its key (wait_for_change with
the last ETag, Google's "View and query VM metadata").
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

# Its neighbours, installed beside it: run as its unit runs it (python3 PATH), Python puts the script's own folder
# first on sys.path.
import guest_attributes
import serving_config
import yaml

URL = "http://metadata.google.internal/computeMetadata/v1/instance/attributes/user-data"
# The last bundle applied whole (its text), on the boot disk: a restart of this unit does not apply it again.
APPLIED = os.environ.get("GEMMA4_T4_BUNDLE_APPLIED", "/var/lib/gemma4-t4/bundle-applied.yaml")
# What is left to do after an apply: {"boot": boot id, "reprovision": bool, "vllm": bool, "requested_us": the monotonic
# time provisioning was asked to run again, in µs}. A reboot provisions and starts vLLM anew: another boot's is void.
PENDING = os.environ.get("GEMMA4_T4_BUNDLE_PENDING", "/var/lib/gemma4-t4/bundle-pending.json")
BOOT_ID = "/proc/sys/kernel/random/boot_id"
ROOT = os.environ.get("GEMMA4_T4_BUNDLE_ROOT", "/")  # where the paths are written (a test's folder)
UNIT_DIR = "/etc/systemd/system/"
LIB_DIR = "/usr/local/lib/gemma4-t4/"
GUEST_ENV = "/etc/gemma4-t4/guest.env"
PROVISION_UNIT = "gemma4-t4-provision.service"
VLLM_UNIT = "gemma4-vllm.service"
SELF_UNIT = "gemma4-t4-guest-watch.service"
# What vLLM runs from, besides its venv (which provisioning switches): its unit, the scripts its unit starts, the
# lock and the clamp provisioning installs into the venv.
VLLM_INPUTS = (f"{UNIT_DIR}{VLLM_UNIT}", f"{LIB_DIR}serve.sh", f"{LIB_DIR}preflight.sh", f"{LIB_DIR}nvidia-uvm.sh",
               f"{LIB_DIR}vllm-path/", "/opt/gemma4-t4/")
# guest.env keys only provisioning or the idle stop read (each at its next run): a change restarts no vLLM.
NOT_VLLMS = frozenset({"IDLE_STOP_MINUTES", "SWAP_SIZE_GB"})
# The long-running units whose script or unit may change: restarted when one does (the idle stop is a timer's
# oneshot, which reads its script at each run; this watcher restarts itself last, apply_once).
WATCHERS = {f"{LIB_DIR}progress.py": "gemma4-t4-progress.service",
            f"{LIB_DIR}guest_attributes.py": "gemma4-t4-progress.service",
            f"{UNIT_DIR}gemma4-t4-progress.service": "gemma4-t4-progress.service",
            f"{LIB_DIR}serving_config.py": "gemma4-t4-serving-watch.service",
            f"{UNIT_DIR}gemma4-t4-serving-watch.service": "gemma4-t4-serving-watch.service"}
# Where a bundle's files may be removed from when a later bundle no longer has them (the guest's own folders).
OWN_DIRS = (LIB_DIR, "/etc/gemma4-t4/", "/opt/gemma4-t4/", f"{UNIT_DIR}gemma4-")


def log(message: str) -> None:
    print(f"guest-bundle: {message}", flush=True)


class NotABundle(ValueError):
    """The key's value is not a cloud-config this guest can apply (nothing is written)."""


def files_of(text: str) -> dict[str, tuple[str, int]]:
    """{path: (content, mode)} of the bundle's write_files; NotABundle for anything else."""
    if not text.startswith("#cloud-config\n"):
        raise NotABundle("not a #cloud-config")
    try:
        config = yaml.safe_load(text)
        entries = config["write_files"]
        files = {entry["path"]: (entry["content"], int(entry.get("permissions", "0644"), 8)) for entry in entries}
    except (yaml.YAMLError, KeyError, TypeError, ValueError) as error:
        raise NotABundle(f"no write_files of paths and contents ({error})") from None
    for path in files:
        if not os.path.isabs(path) or ".." in path.split("/"):
            raise NotABundle(f"a path that is not absolute and plain: {path!r}")
    return files


def enabled_units(text: str) -> list[str]:
    """The units the bundle's runcmd enables (render_user_data: `systemctl enable UNIT...`)."""
    for command in yaml.safe_load(text).get("runcmd", []):
        if isinstance(command, list) and command[:2] == ["systemctl", "enable"]:
            return [str(unit) for unit in command[2:]]
    return []


def _on_disk(path: str) -> tuple[str | None, int | None]:
    try:
        with open(path) as f:
            return f.read(), os.stat(path).st_mode & 0o7777
    except (OSError, UnicodeDecodeError):
        return None, None


def write_files(files: dict[str, tuple[str, int]]) -> list[str]:
    """Write each file that differs (content or mode), atomically; the paths written, in the bundle's order."""
    written = []
    for path, (content, mode) in files.items():
        where = os.path.join(ROOT, path.lstrip("/"))
        if _on_disk(where) == (content, mode):
            continue
        serving_config.write_atomically(where, content, mode)
        written.append(path)
    return written


def env_keys_changed(before: str | None, after: str) -> set[str]:
    def parse(text: str | None) -> dict[str, str]:
        pairs = (line.split("=", 1) for line in (text or "").splitlines() if "=" in line and not line.startswith("#"))
        return dict(pairs)

    old, new = parse(before), parse(after)
    return {key for key in old.keys() | new.keys() if old.get(key) != new.get(key)}


def restarts_vllm(written: list[str], guest_env_keys: set[str]) -> bool:
    """Whether vLLM must start again to run what was written (an unchanged guest.env has no keys)."""
    return any(path.startswith(VLLM_INPUTS) for path in written) or bool(guest_env_keys - NOT_VLLMS)


def systemctl(*args: str) -> int:
    return subprocess.run(["systemctl", *args], check=False).returncode


def unit_state(unit: str) -> tuple[str, str]:
    out = subprocess.run(["systemctl", "show", unit, "-P", "ActiveState", "-P", "SubState"], capture_output=True,
                         text=True).stdout.split()
    return (out[0], out[1]) if len(out) == 2 else ("", "")


def active_since_us(unit: str) -> int:
    """When UNIT last became active, on the monotonic clock (µs); 0 if never this boot."""
    out = subprocess.run(["systemctl", "show", unit, "-P", "ActiveEnterTimestampMonotonic"], capture_output=True,
                         text=True).stdout.strip()
    return int(out) if out.isdigit() else 0


def boot_id() -> str:
    try:
        with open(BOOT_ID) as f:
            return f.read().strip()
    except OSError:
        return ""


def pending() -> dict:
    try:
        with open(PENDING) as f:
            todo = json.load(f)
    except (OSError, ValueError):
        return {}
    return todo if isinstance(todo, dict) and todo.get("boot") == boot_id() else {}


def save_pending(todo: dict) -> None:
    if not todo.get("reprovision") and not todo.get("vllm"):
        if os.path.exists(PENDING):
            os.remove(PENDING)
        return
    serving_config.write_atomically(PENDING, json.dumps({**todo, "boot": boot_id()}), 0o644)


def act_on_pending() -> bool:
    """One step of what is left to do after an apply; whether anything is still left."""
    todo = pending()
    state = unit_state(PROVISION_UNIT)
    if todo.get("reprovision"):
        if state == ("activating", "start"):
            return True  # a run under way finishes first
        todo.update(reprovision=False, requested_us=int(time.monotonic() * 1e6))
        systemctl("restart", "--no-block", PROVISION_UNIT)
    elif todo.get("vllm") and state[0] == "active" and active_since_us(PROVISION_UNIT) >= todo.get("requested_us", 0):
        log("provisioned with the new bundle: restarting vLLM on it")
        systemctl("try-restart", VLLM_UNIT)
        todo["vllm"] = False
    save_pending(todo)
    return bool(todo.get("reprovision") or todo.get("vllm"))


def changes(text: str, previous: str | None) -> tuple[list[str], list[str], set[str]]:
    """Write the bundle TEXT; (the paths that changed, the paths PREVIOUS had and TEXT has not, the guest.env keys
    that changed). A path counts when it was written now or when the last bundle applied had it otherwise (an apply
    stopped after its writes)."""
    files = files_of(text)
    try:
        before = files_of(previous) if previous is not None else {}
    except NotABundle:
        before = {}
    env_before = before[GUEST_ENV][0] if GUEST_ENV in before else _on_disk(os.path.join(ROOT, GUEST_ENV.lstrip("/")))[0]
    written = write_files(files)
    changed = written + [path for path in files if before and before.get(path) != files[path] and path not in written]
    gone = [path for path in before if path not in files and path.startswith(OWN_DIRS)]
    keys = env_keys_changed(env_before, files[GUEST_ENV][0]) if GUEST_ENV in changed else set()
    return changed, gone, keys


def remove(paths: list[str]) -> None:
    """The files a later bundle no longer has: a unit disabled and stopped first, then each file removed."""
    units = [os.path.basename(path) for path in paths if path.startswith(UNIT_DIR)]
    if units:
        systemctl("disable", "--now", *units)
    for path in paths:
        where = os.path.join(ROOT, path.lstrip("/"))
        if os.path.lexists(where):
            os.remove(where)


def apply(text: str, previous: str | None) -> list[str]:
    """Apply the bundle TEXT over PREVIOUS (the last one applied; None on the first boot, whose files cloud-init
    wrote): write what differs, remove what is gone, reload, enable and start, restart the watchers it touches, and
    leave provisioning and vLLM's restart to act_on_pending. The paths changed or removed."""
    changed, gone, keys = changes(text, previous)
    if not changed and not gone:
        return []
    touched = changed + gone
    log(f"{len(changed)} file(s) changed, {len(gone)} removed: {' '.join(touched)}")
    guest_attributes.main(["phase", "update", f"{len(touched)} guest file(s) changed: {' '.join(touched)}"])
    remove(gone)
    if any(path.startswith(UNIT_DIR) for path in touched):
        systemctl("daemon-reload")
    # Started too: a unit a release adds (a new guard) runs from this moment, not from the next boot. Provisioning
    # and vLLM are left to act_on_pending (a start of either here would run it before the order it needs).
    units = enabled_units(text)
    systemctl("enable", *units)
    systemctl("start", "--no-block", *[unit for unit in units if unit not in (PROVISION_UNIT, VLLM_UNIT)])
    for unit in sorted({unit for path, unit in WATCHERS.items() if path in touched}):
        systemctl("try-restart", unit)
    todo = pending()
    save_pending({**todo, "reprovision": True, "vllm": todo.get("vllm") or restarts_vllm(touched, keys)})
    return touched


def applied_before() -> str | None:
    return _on_disk(APPLIED)[0]


def remember(text: str) -> None:
    serving_config.write_atomically(APPLIED, text, 0o644)


def apply_once(text: str) -> None:
    previous = applied_before()
    if text != previous:
        try:
            changed = apply(text, previous)
        except NotABundle as refused:
            log(f"the metadata key user-data is not a gemma4-t4 bundle ({refused}): nothing applied")
            return
        remember(text)
        if f"{LIB_DIR}guest_bundle.py" in changed or f"{UNIT_DIR}{SELF_UNIT}" in changed:
            log("this watcher itself changed: starting its new version")
            systemctl("restart", "--no-block", SELF_UNIT)
            return
    act_on_pending()


def watch(url: str = URL) -> None:
    # While something is left to do, ask again within the half minute (the metadata server answers at once when the
    # value changed meanwhile); otherwise wait for a change as long as the server lets us.
    for text in serving_config.values(url, lambda: 30 if pending() else serving_config.WAIT_S, log):
        apply_once(text)


def main(argv: list[str]) -> int:
    if argv == ["watch"]:
        watch()
    if len(argv) == 2 and argv[0] == "apply":
        with open(argv[1]) as f:
            apply_once(f.read())
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
