#!/usr/bin/python3
"""The guest's files and settings from the VM's metadata key `user-data`, applied on the running VM.

    guest_bundle.py watch         gemma4-t4-guest-watch.service: apply the bundle as it stands, then each new one
    guest_bundle.py apply FILE    apply the bundle in FILE once (a person's, or a test's)

cloud-init applies user-data once per instance, on its first boot. Every later change (`pulumi up` with a new
idleStopMinutes, swapSizeGb or vllmVersion, or a release whose scripts, units or clamp changed) reaches the VM as
a new value of the same metadata key, updated in place (setMetadata), and lands here: the files it lists that
differ are written (atomically, each with its mode), systemd reloads what changed, provisioning runs again (each
of its steps checks before it acts: a new lock installs a new venv beside the one serving, a new swap size makes
the new swapfile before the old one goes), and vLLM restarts only when something it runs from changed, once
provisioning is done; a guard's value alone (idle minutes) restarts nothing. The startup-script, which the
provider replaces the VM for, never changes with any of this: only a new machine replaces the VM.

Each apply is reported as the phase `update` (its detail: the files that changed), and applying the same bundle
twice changes nothing. The metadata server is watched as serving_config.py watches its key (wait_for_change with
the last ETag, Google's "View and query VM metadata").
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.error

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # its neighbours, installed beside it
import guest_attributes
import serving_config

URL = "http://metadata.google.internal/computeMetadata/v1/instance/attributes/user-data"
# The last bundle applied whole (its text), on the boot disk: a restart of this unit does not apply it again.
APPLIED = os.environ.get("GEMMA4_T4_BUNDLE_APPLIED", "/var/lib/gemma4-t4/bundle-applied.yaml")
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
               "/opt/gemma4-t4/")
# guest.env keys only provisioning or the idle stop read (each at its next run): a change restarts no vLLM.
NOT_VLLMS = frozenset({"IDLE_STOP_MINUTES", "SWAP_SIZE_GB"})
# The long-running units whose script may change: restarted when it does (the idle stop is a timer's oneshot,
# which reads its script at each run).
WATCHERS = {f"{LIB_DIR}progress.py": "gemma4-t4-progress.service",
            f"{LIB_DIR}guest_attributes.py": "gemma4-t4-progress.service",
            f"{LIB_DIR}serving_config.py": "gemma4-t4-serving-watch.service"}


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
        os.makedirs(os.path.dirname(where), exist_ok=True)
        partial = f"{where}.{os.getpid()}.new"
        with open(partial, "w") as f:
            f.write(content)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(partial, mode)
        os.replace(partial, where)
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


def reprovision(poll_s: float = 5) -> bool:
    """Provisioning run again for the new bundle; True once it is done, False at a failure it does not retry.
    A run under way finishes first (stopping it in the driver's build would cost that build); one that waits to
    retry is started now. A failure it retries is waited through, as systemd retries it."""
    while unit_state(PROVISION_UNIT) == ("activating", "start"):
        time.sleep(poll_s)
    systemctl("restart", PROVISION_UNIT)  # a oneshot: returns when this run has ended
    while True:
        active, _ = unit_state(PROVISION_UNIT)
        if active == "active":
            return True
        if active == "failed":  # exit 3: the unit's RestartPreventExitStatus, no retry comes
            return False
        time.sleep(poll_s)


def changes(text: str, previous: str | None) -> tuple[list[str], set[str]]:
    """Write the bundle TEXT; (the paths that changed, the guest.env keys that changed). A path counts when it was
    written now or when the last bundle applied had it otherwise (an apply stopped after its writes)."""
    files = files_of(text)
    try:
        before = files_of(previous) if previous is not None else {}
    except NotABundle:
        before = {}
    env_before = before[GUEST_ENV][0] if GUEST_ENV in before else _on_disk(os.path.join(ROOT, GUEST_ENV.lstrip("/")))[0]
    written = write_files(files)
    changed = written + [path for path in files if before and before.get(path) != files[path] and path not in written]
    keys = env_keys_changed(env_before, files[GUEST_ENV][0]) if GUEST_ENV in changed else set()
    return changed, keys


def apply(text: str, previous: str | None) -> list[str]:
    """Apply the bundle TEXT over PREVIOUS (the last one applied; None on the first boot, whose files cloud-init
    wrote): write what differs, then reload, enable, provision and restart what it touches. The paths changed."""
    changed, keys = changes(text, previous)
    if not changed:
        return []
    log(f"{len(changed)} file(s) changed: {' '.join(changed)}")
    guest_attributes.main(["phase", "update", f"{len(changed)} guest file(s) changed: {' '.join(changed)}"])
    if any(path.startswith(UNIT_DIR) for path in changed):
        systemctl("daemon-reload")
    systemctl("enable", *enabled_units(text))
    for unit in sorted({unit for script, unit in WATCHERS.items() if script in changed}):
        systemctl("try-restart", unit)
    if reprovision() and restarts_vllm(changed, keys):
        log("provisioned with the new bundle: restarting vLLM on it")
        systemctl("try-restart", VLLM_UNIT)
    elif restarts_vllm(changed, keys):
        log("provisioning stopped at a failure it does not retry: vLLM serves on as it was")
    return changed


def applied_before() -> str | None:
    return _on_disk(APPLIED)[0]


def remember(text: str) -> None:
    os.makedirs(os.path.dirname(APPLIED), exist_ok=True)
    with open(f"{APPLIED}.new", "w") as f:
        f.write(text)
    os.replace(f"{APPLIED}.new", APPLIED)


def apply_once(text: str) -> None:
    previous = applied_before()
    if text == previous:
        return
    try:
        changed = apply(text, previous)
    except NotABundle as refused:
        log(f"the metadata key user-data is not a gemma4-t4 bundle ({refused}): nothing applied")
        return
    remember(text)
    if f"{LIB_DIR}guest_bundle.py" in changed or f"{UNIT_DIR}{SELF_UNIT}" in changed:
        log("this watcher itself changed: starting its new version")
        systemctl("restart", "--no-block", SELF_UNIT)


def watch(url: str = URL, wait_s: int = serving_config.WAIT_S) -> None:
    etag = "NONE"  # any value answers at once: the bundle as it stands (a change made while the VM was stopped)
    while True:
        try:
            text, etag = serving_config.get(url, etag, wait_s)
        except serving_config.NoKey:
            time.sleep(60)
            continue
        except (urllib.error.URLError, OSError) as error:
            log(f"the metadata server did not answer ({error}); asking again in 10 s")
            time.sleep(10)
            continue
        if not etag:
            etag = "NONE"
            time.sleep(10)
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
