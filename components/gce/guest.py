"""Renders the GCE guest's metadata: pure functions from the typed config to a cloud-config, the
startup-script and the serving values.

The scripts and units are real files in the project's cloudinit/ (shellcheck and systemd-analyze
run on them as they are), installed with the package as `gemma4_t4.cloudinit`; render_user_data only
ships them, with guest.env, which carries the guest's settings. The Turing clamp's source
(`gemma4_t4.turing`) goes along, so the VM installs exactly this release's clamp into its vLLM
virtualenv. vLLM's own values (vllm.env) are not in the user-data: they travel in a metadata key of
their own (SERVING_METADATA_KEY), which the provider updates in place and a unit on the VM watches, so a
new maxModelLen restarts vLLM instead of replacing the VM.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from importlib.resources import files
from importlib.resources.abc import Traversable

import yaml

from gemma4_t4 import catalog

from ..clamp import clamp_source

# Package data: the project's cloudinit/ folder, in a checkout or an installed wheel.
GUEST_DIR = files("gemma4_t4.cloudinit")
# What GCE accepts as one metadata value.
GCE_METADATA_VALUE_LIMIT = 256 * 1024

LIB_DIR = "/usr/local/lib/gemma4-t4"
# What vLLM's process may import besides its venv (its PYTHONPATH with the key gate): a folder of its own, so that no
# guest script's module (progress, hf_token, ...) can shadow a package of vLLM's venv.
VLLM_PATH_DIR = f"{LIB_DIR}/vllm-path"
ETC_DIR = "/etc/gemma4-t4"
UNIT_DIR = "/etc/systemd/system"
CLAMP_SRC = "/opt/gemma4-t4/turing"
LOCKS_DIR = GUEST_DIR / "locks"
VLLM_LOCK = "/opt/gemma4-t4/vllm-lock.txt"
# Every apt-get on the VM waits for apt's lock instead of failing at once: the Debian 13 image enables
# unattended-upgrades and apt's timers, and the guest agent's startup-script unit runs
# Before=apt-daily.service, so they start just as provisioning does (apt.conf(5): DPkg::Lock::Timeout).
APT_LOCK_CONF = "/etc/apt/apt.conf.d/90gemma4-t4-lock"
APT_LOCK_TIMEOUT = 'DPkg::Lock::Timeout "1200";\n'
# The boot test's own settings (tests/guest/test_guest_boot.py writes it); the plan never does.
TEST_ENV = "/etc/gemma4-t4/test.env"
PROVISION_UNIT = "gemma4-t4-provision.service"
IDLE_STOP_TIMER = "gemma4-t4-idle-stop.timer"
VLLM_UNIT = "gemma4-vllm.service"
# The serving values: fetched from SERVING_METADATA_KEY into VLLM_ENV before vLLM starts, then watched.
SERVING_CONFIG_UNIT = "gemma4-t4-serving-config.service"
SERVING_WATCH_UNIT = "gemma4-t4-serving-watch.service"
# Publishes the boot's phase as guest attributes (namespace GUEST_ATTRIBUTES_NAMESPACE).
PROGRESS_UNIT = "gemma4-t4-progress.service"
# Applies a new user-data (this bundle: a guard's value, the swap size, the vLLM lock, a release's files) on the
# running VM: cloud-init applies user-data once per instance (guest_bundle.py).
GUEST_WATCH_UNIT = "gemma4-t4-guest-watch.service"
SERVING_METADATA_KEY = "gemma4-t4-serving"
# vllm.env's name of the secret that holds hfToken (projects/P/secrets/S): serve.sh reads the token with it.
HF_TOKEN_SECRET_ENV = "HF_TOKEN_SECRET"
VLLM_ENV = "/etc/gemma4-t4/vllm.env"
GUEST_ATTRIBUTES_NAMESPACE = "gemma4-t4"
DATA_MOUNT = "/opt1"  # gemma4-vllm.service names it too (ExecStart)
SERVICE_USER = "vllm"
# The venv the service runs: a symlink to the lock's own venv (install-vllm.sh); 0.2.0's was a directory at
# {DATA_MOUNT}/vllm/venv, removed once the new one serves (prune-venvs.sh).
VENV = f"{DATA_MOUNT}/vllm/current"


@dataclass(frozen=True)
class GuestSettings:
    data_device_name: str  # the GCE attached-disk device name: /dev/disk/by-id/google-<name>
    swap_size_gb: int
    idle_stop_minutes: int = catalog.DEFAULT_IDLE_STOP_MINUTES
    vllm_version: str = catalog.PINS["vllm.gce"]  # one of catalog.GCE_VLLM_VERSIONS, each with its lock


def lock_file(vllm_version: str) -> Traversable:
    """The lock the VM installs vLLM VERSION from (`make guest-lock` writes one per catalog.GCE_VLLM_VERSIONS)."""
    return LOCKS_DIR / f"vllm-gce-{vllm_version}.txt"


def guest_env(settings: GuestSettings) -> dict[str, str]:
    return {
        "DATA_DEVICE": f"/dev/disk/by-id/google-{settings.data_device_name}",
        "DATA_MOUNT": DATA_MOUNT,
        "SWAP_SIZE_GB": str(settings.swap_size_gb),
        "SERVICE_USER": SERVICE_USER,
        "PYTHON": catalog.PINS["gce.python"],
        # A symlink to this lock's own venv, $DATA_MOUNT/vllm/venv-VERSION-LOCKHASH (install-vllm.sh).
        "VENV": VENV,
        "VLLM_LOCK": VLLM_LOCK,
        "CLAMP_SRC": CLAMP_SRC,
        "DRIVER_BRANCH": catalog.PINS["nvidia.driver_branch"],
        "CUDA_REPO_URL": catalog.PINS["nvidia.cuda_repo_url"],
        # The repository's signing key, fetched from beside it, is trusted only with this fingerprint.
        "CUDA_REPO_KEY": catalog.PINS["nvidia.cuda_repo_key"],
        "CUDA_REPO_KEY_FINGERPRINT": catalog.PINS["nvidia.cuda_repo_key_fingerprint"],
        "REBOOT_FLAG": "/run/gemma4-t4/reboot-required",
        "IDLE_STOP_MINUTES": str(settings.idle_stop_minutes),
    }


def vllm_args_line(serving_args: list[str]) -> str:
    """vLLM's arguments as one line of vllm.env: quoted as a shell quotes them (shlex.join), which serve.sh
    splits back with shlex into an array, so a value with a space stays one argument. systemd's
    EnvironmentFile hands such a value over as written, quotes included, as long as it neither starts with a
    quote nor holds a backslash (its env-file parser, src/basic/env-file.c: quotes count only at the value's
    start, a backslash escapes anywhere); a newline would end the line. Those are refused."""
    line = shlex.join(serving_args)
    if any(c in arg for arg in serving_args for c in "\\\n\r") or line.startswith(("'", '"')):
        raise ValueError(f"a vLLM argument holds a backslash or a line break, or the first is quoted: {serving_args}")
    return line


def vllm_env(serving_args: list[str], port: int = 8000, checkpoint_bytes: int = 0) -> dict[str, str]:
    """vLLM's environment on the VM. CHECKPOINT_BYTES (0: not known) is the model's download size, which the
    guest's progress reports against; METRICS_URL and the HEALTH_ and PROGRESS_ values are read by the idle stop
    (the port is a serving value; the cap grows with the model's download; catalog/first_boot.py derives them)."""
    return {
        "VLLM_ARGS": vllm_args_line(serving_args),
        "METRICS_URL": f"http://127.0.0.1:{port}/metrics",
        "CHECKPOINT_BYTES": str(checkpoint_bytes),
        "HEALTH_BOUND_MINUTES": str(catalog.health_bound_minutes(checkpoint_bytes)),
        "HEALTH_STALL_MINUTES": str(catalog.HEALTH_STALL_MINUTES),
        "PROGRESS_CPU_S": f"{catalog.PROGRESS_CPU_S:g}",
        "PROGRESS_RX_BYTES": str(catalog.PROGRESS_RX_BYTES),
        "HOME": f"{DATA_MOUNT}/home",
        "HF_HOME": f"{DATA_MOUNT}/cache/huggingface",
        "VLLM_CACHE_ROOT": f"{DATA_MOUNT}/cache/vllm",
        "TMPDIR": f"{DATA_MOUNT}/cache/tmp",
        "VLLM_NO_USAGE_STATS": "1",
    }


def _env_file(values: dict[str, str]) -> str:
    return "# Generated by gemma4-t4 from the stack config; edit the stack, not this file.\n" + "".join(
        f"{key}={value}\n" for key, value in values.items()
    )


def _clamp_files() -> list[tuple[str, str]]:
    return [(f"{CLAMP_SRC}/{name}", source.read_text()) for name, source in clamp_source().items()]


class _BlockStyleDumper(yaml.SafeDumper):
    """Multi-line strings as literal blocks, so the shipped scripts read as scripts."""


_BlockStyleDumper.add_representer(
    str,
    lambda dumper, text: dumper.represent_scalar("tag:yaml.org,2002:str", text, style="|" if "\n" in text else None),
)


def render_serving_env(serving_args: list[str], port: int = 8000, checkpoint_bytes: int = 0,
                       api_key: str | None = None, hf_token_secret: str | None = None) -> str:
    """The value of the VM's SERVING_METADATA_KEY: vllm.env as the guest writes it. Deterministic. With API_KEY,
    vLLM's key as its environment variable (catalog.vllm.API_KEY_ENV), not a flag a process listing shows, and the
    guest's key gate on every route (catalog.vllm.KEY_GATE_MIDDLEWARE: vLLM itself checks the key on /v1 only).
    With HF_TOKEN_SECRET, the Secret Manager secret serve.sh reads the Hub token from (components/gce/hf_token.py)."""
    if api_key is not None:
        serving_args = [*serving_args, "--middleware", catalog.vllm.KEY_GATE_MIDDLEWARE]
    values = vllm_env(serving_args, port, checkpoint_bytes)
    if api_key is not None:
        if not api_key or any(c.isspace() for c in api_key):
            raise ValueError("the API key is empty or holds whitespace: it is one line of vLLM's environment file")
        values[catalog.vllm.API_KEY_ENV] = api_key
        values["PYTHONPATH"] = VLLM_PATH_DIR  # the key gate's module alone (cloudinit/vllm_path/vllm_key_gate.py)
    if hf_token_secret is not None:
        values[HF_TOKEN_SECRET_ENV] = hf_token_secret
    text = _env_file(values)
    if len(text.encode()) > GCE_METADATA_VALUE_LIMIT:
        raise ValueError(f"the serving values are {len(text.encode())} bytes; GCE allows {GCE_METADATA_VALUE_LIMIT}")
    return text


def render_user_data(settings: GuestSettings) -> str:
    """The #cloud-config for the GCE VM: the guest's files and settings, no serving value. Deterministic:
    same inputs, same bytes."""
    scripts = guest_scripts()
    units = guest_units()
    write_files = (
        [{"path": f"{LIB_DIR}/{s.name}", "permissions": "0755", "content": s.read_text()} for s in scripts]
        + [{"path": f"{VLLM_PATH_DIR}/{m.name}", "permissions": "0644", "content": m.read_text()}
           for m in vllm_path_modules()]
        + [{"path": f"{UNIT_DIR}/{u.name}", "permissions": "0644", "content": u.read_text()} for u in units]
        + [
            {"path": f"{ETC_DIR}/guest.env", "permissions": "0644", "content": _env_file(guest_env(settings))},
        ]
        + [{"path": path, "permissions": "0644", "content": text} for path, text in _clamp_files()]
        + [{"path": VLLM_LOCK, "permissions": "0644", "content": lock_file(settings.vllm_version).read_text()}]
        + [{"path": APT_LOCK_CONF, "permissions": "0644", "content": APT_LOCK_TIMEOUT}]
    )
    # The idle stop's timer runs whatever idleStopMinutes is (0: each run does nothing), so a new value is a change of
    # guest.env alone, which lands on the running VM.
    enabled = [PROVISION_UNIT, VLLM_UNIT, SERVING_CONFIG_UNIT, SERVING_WATCH_UNIT, PROGRESS_UNIT, GUEST_WATCH_UNIT,
               IDLE_STOP_TIMER]
    config = {
        # No users here (the bootstrap's cloud-init config sets none): GCE's guest agent manages
        # login users and SSH keys, and provision.sh creates the service user with the UID its
        # files on the data disk already have.
        "ssh_deletekeys": False,
        "write_files": write_files,
        "runcmd": [
            ["systemctl", "daemon-reload"],
            ["systemctl", "enable", *enabled],
            # --no-block: provisioning reboots once for the driver; cloud-init must not wait on it.
            # The idle-stop timer starts now too: a driver that loads without a reboot means no
            # later boot would start it, and the VM would bill on while idle.
            ["systemctl", "start", "--no-block", PROGRESS_UNIT, VLLM_UNIT, SERVING_WATCH_UNIT, GUEST_WATCH_UNIT,
             IDLE_STOP_TIMER],
        ],
    }
    text = "#cloud-config\n" + yaml.dump(config, Dumper=_BlockStyleDumper, sort_keys=False, width=4096)
    if len(text.encode()) > GCE_METADATA_VALUE_LIMIT:
        raise ValueError(f"user-data is {len(text.encode())} bytes; GCE allows {GCE_METADATA_VALUE_LIMIT}")
    return text


def _listed(folder: Traversable, suffixes: tuple[str, ...]) -> list[Traversable]:
    return sorted((p for p in folder.iterdir() if p.name.endswith(suffixes)), key=lambda p: p.name)


def guest_scripts() -> list[Traversable]:
    return _listed(GUEST_DIR / "scripts", (".sh", ".py"))


def vllm_path_modules() -> list[Traversable]:
    return _listed(GUEST_DIR / "vllm_path", (".py",))


def guest_units() -> list[Traversable]:
    return _listed(GUEST_DIR / "units", (".service", ".timer"))


def bootstrap_script() -> str:
    """The VM's startup-script (the provider's metadata_startup_script, which it replaces the instance for when it
    changes: ForceNew). The same text for every setting and every release that keeps cloudinit/bootstrap.sh: it
    installs cloud-init and applies the user-data on the instance's first boot; every later user-data (the rest of
    the metadata, updated in place) is applied on the running VM by GUEST_WATCH_UNIT."""
    return (GUEST_DIR / "bootstrap.sh").read_text()
