"""The guest's scripts and units, checked by the real tools, and their idempotency exercised
here where a machine allows (a loop device for the data disk; swap files and fstab edits)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid as uuidlib
from pathlib import Path

import pytest
import yaml
from conftest import REPO, require_tool, run

from gemma4_t4.components.gce import guest as render

SCRIPTS = sorted((REPO / "cloudinit").rglob("*.sh")) + sorted((REPO / "turing").rglob("*.sh"))
UNITS = render.guest_units()
DISK_SCRIPT = REPO / "cloudinit" / "scripts" / "setup-data-disk.sh"
# A step's exit status for a failure no retry heals (provision.sh's TERMINAL, its unit's RestartPreventExitStatus).
TERMINAL = 3
SWAP_SCRIPT = REPO / "cloudinit" / "scripts" / "setup-swap.sh"


@pytest.mark.parametrize("script", SCRIPTS, ids=[s.name for s in SCRIPTS])
def test_shellcheck_clean(script):
    result = run([require_tool("shellcheck"), "--severity=style", str(script)])
    assert result.returncode == 0, result.stdout + result.stderr


def test_units_pass_systemd_analyze_verify(tmp_path):
    """verify insists that every Exec path exists: point them at this checkout's scripts and
    this interpreter, keep every other line as shipped."""
    require_tool("systemd-analyze")
    for unit in UNITS:
        text = unit.read_text().replace(render.LIB_DIR + "/", str(REPO / "cloudinit" / "scripts") + "/")
        text = text.replace(f"{render.DATA_MOUNT}/vllm/venv/bin/python", sys.executable)
        (tmp_path / unit.name).write_text(text)
    result = run(["systemd-analyze", "verify", *[u.name for u in UNITS]], cwd=tmp_path)
    assert result.returncode == 0 and not result.stderr.strip(), result.stderr


def _unit_lines(name: str) -> list[str]:
    return (REPO / "cloudinit" / "units" / name).read_text().splitlines()


def test_units_ship_what_the_issue_requires():
    vllm = _unit_lines("gemma4-vllm.service")
    for line in ("Restart=on-failure", "User=vllm", "NoNewPrivileges=yes",
                 "After=gemma4-t4-provision.service network-online.target",
                 "ExecStartPre=/usr/local/lib/gemma4-t4/preflight.sh"):
        assert line in vllm
    assert "ExecStart=/usr/local/lib/gemma4-t4/serve.sh" in vllm
    serve = (REPO / "cloudinit" / "scripts" / "serve.sh").read_text()
    assert 'venv_dir=$(readlink -f "$VENV")' in serve
    assert 'exec "$venv_dir/bin/python" -m vllm.entrypoints.openai.api_server "${args[@]}"' in serve
    assert f"VENV={render.DATA_MOUNT}/vllm/current" in render.render_user_data(render.GuestSettings("gemma4-data", 16))


def _snapshot(hub, model: str, files: dict[str, str], incomplete: bool = False) -> None:
    repo = hub / f"models--{model.replace('/', '--')}"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text("abc123")
    snapshot = repo / "snapshots" / "abc123"
    snapshot.mkdir(parents=True)
    (repo / "blobs").mkdir()
    for name, text in files.items():
        (snapshot / name).write_text(text)
    if incomplete:
        (repo / "blobs" / "0123.incomplete").write_text("")


def _whole(hub, model: str, revision: str = "") -> bool:
    script = REPO / "cloudinit" / "scripts" / "serve.sh"
    done = subprocess.run(["bash", "-c", f'. "{script}"; snapshot_whole "$1" "$2" "$3"', "-", str(hub), model,
                           revision])
    return done.returncode == 0


def test_the_service_serves_offline_only_from_a_whole_snapshot(tmp_path):
    """After the first healthy start the Hub id is served from the data disk with HF_HUB_OFFLINE=1: a reboot
    without network then serves as before. A half-downloaded snapshot is never served offline."""
    index = '{"weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}'
    _snapshot(tmp_path / "whole", "google/gemma-4-E2B-it", {"config.json": "{}",
              "model.safetensors.index.json": index, "model-00001-of-00002.safetensors": "",
              "model-00002-of-00002.safetensors": ""})
    assert _whole(tmp_path / "whole", "google/gemma-4-E2B-it")
    _snapshot(tmp_path / "shard", "google/gemma-4-E2B-it", {"config.json": "{}",
              "model.safetensors.index.json": index, "model-00001-of-00002.safetensors": ""})
    assert not _whole(tmp_path / "shard", "google/gemma-4-E2B-it")
    _snapshot(tmp_path / "partial", "m/x", {"config.json": "{}", "model.safetensors": ""}, incomplete=True)
    assert not _whole(tmp_path / "partial", "m/x")
    _snapshot(tmp_path / "single", "m/x", {"config.json": "{}", "model.safetensors": ""})
    assert _whole(tmp_path / "single", "m/x") and not _whole(tmp_path / "single", "m/y")
    script = REPO / "cloudinit" / "scripts" / "serve.sh"
    model = subprocess.run(["bash", "-c", f'. "{script}"; model_arg --host 127.0.0.1 --model g/m --dtype float16'],
                           capture_output=True, text=True).stdout.strip()
    assert model == "g/m"


def test_a_pinned_revision_is_served_offline_only_from_its_own_snapshot(tmp_path):
    """With --revision the snapshot checked is that revision's: a commit's own directory (huggingface_hub writes no
    ref for a commit), a branch's or tag's refs/NAME; main's snapshot is not the pinned one."""
    commit = "0123456789abcdef0123456789abcdef01234567"
    _snapshot(tmp_path / "main", "m/x", {"config.json": "{}", "model.safetensors": ""})
    assert _whole(tmp_path / "main", "m/x") and not _whole(tmp_path / "main", "m/x", commit)
    assert not _whole(tmp_path / "main", "m/x", "v1.0")
    pinned = tmp_path / "main" / "models--m--x" / "snapshots" / commit
    pinned.mkdir()
    (pinned / "config.json").write_text("{}")
    assert not _whole(tmp_path / "main", "m/x", commit), "no weights yet"
    (pinned / "model.safetensors").write_text("")
    assert _whole(tmp_path / "main", "m/x", commit)
    (tmp_path / "main" / "models--m--x" / "refs" / "v1.0").write_text(commit)
    assert _whole(tmp_path / "main", "m/x", "v1.0")
    script = REPO / "cloudinit" / "scripts" / "serve.sh"
    revision = subprocess.run(["bash", "-c", f'. "{script}"; flag_value --revision --model g/m --revision {commit}'],
                              capture_output=True, text=True).stdout.strip()
    assert revision == commit


def test_a_failed_provisioning_leaves_vllm_to_its_preflight_not_a_dependency_failure():
    """Requires= would fail vLLM's start with only "Dependency failed", which Restart= never retries."""
    vllm = _unit_lines("gemma4-vllm.service")
    assert not [line for line in vllm if line.startswith(("Requires", "BindsTo", "Requisite"))]
    assert "Wants=gemma4-t4-provision.service network-online.target" in vllm
    provision = _unit_lines("gemma4-t4-provision.service")
    assert "Restart=on-failure" in provision and "StartLimitIntervalSec=0" in provision


def test_nvidia_uvm_is_loaded_with_root_privileges_before_the_unprivileged_service():
    """NoNewPrivileges= voids the setuid nvidia-modprobe CUDA calls: "+" runs this one step as root."""
    vllm = _unit_lines("gemma4-vllm.service")
    first_pre = next(line for line in vllm if line.startswith("ExecStartPre="))
    assert first_pre == "ExecStartPre=+/usr/local/lib/gemma4-t4/nvidia-uvm.sh"
    assert "nvidia-modprobe -u -c=0" in (REPO / "cloudinit" / "scripts" / "nvidia-uvm.sh").read_text()


def test_the_boot_tests_setting_is_read_only_from_a_file_the_plan_never_writes():
    text = render.render_user_data(render.GuestSettings("gemma4-data", 16, idle_stop_minutes=10))
    files = yaml.safe_load(text)["write_files"]
    assert render.TEST_ENV not in {f["path"] for f in files}
    env_files = [f["content"] for f in files if f["path"].endswith(".env")]
    assert env_files and not any("GEMMA4_T4_ALLOW_CPU_STANDIN" in content for content in env_files)
    assert f"EnvironmentFile=-{render.TEST_ENV}" in _unit_lines("gemma4-vllm.service")


def test_every_apt_get_waits_for_apts_lock_and_dpkg_is_recovered_first():
    """The image's apt timers start with provisioning: an apt-get that fails at once on the lock would
    log a FAILED step on a healthy first boot; an interrupted dpkg would fail every later apt-get."""
    files = {f["path"]: f["content"] for f in yaml.safe_load(render.render_user_data(
        render.GuestSettings("gemma4-data", 16)))["write_files"]}
    assert files[render.APT_LOCK_CONF] == 'DPkg::Lock::Timeout "1200";\n'
    provision = (REPO / "cloudinit" / "scripts" / "provision.sh").read_text()
    assert provision.index('step "dpkg"') < provision.index('step "packages"') < provision.index('step "nvidia driver"')
    assert '"$lib/dpkg-recover.sh"' in provision
    driver = (REPO / "cloudinit" / "scripts" / "install-driver.sh").read_text()
    assert "dpkg -i" not in driver and "dpkg --purge" not in driver, "every package change waits for apt's lock"
    assert "apt-get purge -y cuda-keyring" in driver


def test_the_vm_gets_a_cxx_compiler_and_the_persistence_daemon():
    provision = (REPO / "cloudinit" / "scripts" / "provision.sh").read_text()
    assert " g++ " in provision.split("for pkg in", 1)[1].splitlines()[0]
    driver = (REPO / "cloudinit" / "scripts" / "install-driver.sh").read_text()
    assert "nvidia-persistenced" in driver and "persistence_on" in driver


def test_persistence_mode_is_turned_on_past_the_packaged_units_flag():
    """NVIDIA's unit is static (enable does nothing) and forces persistence mode off: the guest's drop-in runs the
    packaged command without --no-persistence-mode, and multi-user.target wants the unit. The stand-in unit is
    the packaged one, so the boot test meets the same unit."""
    from guest import fake_nvidia

    unit = fake_nvidia.PERSISTENCED_UNIT
    assert "[Install]" not in unit and "StopWhenUnneeded=true" in unit and " --no-persistence-mode " in unit
    driver = (REPO / "cloudinit" / "scripts" / "install-driver.sh").read_text()
    pipeline = driver.split('command=$(', 1)[1].split(")\n", 1)[0].replace('"$unit"', "-")
    command = subprocess.run(["bash", "-c", pipeline], input=unit, capture_output=True, text=True).stdout.strip()
    assert command == "/usr/bin/nvidia-persistenced --user nvidia-persistenced --verbose"
    assert "systemctl add-wants multi-user.target nvidia-persistenced.service" in driver
    assert "systemctl enable nvidia-persistenced" not in driver


# Recorded from dpkg 1.22 and apt 3.0 in Debian 13 (the boot test's root filesystem, the NVIDIA stand-in's
# packages): the state a stop during apt's unpack of xserver-xorg-video-nvidia leaves, with nvidia-driver,
# which depends on it, unpacked before it.
DPKG_AUDIT_HALF_INSTALLED = """The following packages are in a mess due to serious problems during
installation.  They must be reinstalled for them (and any packages
that depend on them) to function properly:
 xserver-xorg-video-nvidia (no description available)

The following packages have been unpacked but not yet configured.
They must be configured using dpkg --configure or the configure
menu option in dselect for them to work:
 nvidia-driver        stand-in for NVIDIA's nvidia-driver
"""
DPKG_CONFIGURE_DEPENDENCY_PROBLEMS = """dpkg: dependency problems prevent configuration of nvidia-driver:
 nvidia-driver depends on xserver-xorg-video-nvidia (= 615.71.09-1); however:
  Package xserver-xorg-video-nvidia is not installed.

dpkg: error processing package nvidia-driver (--configure):
 dependency problems - leaving unconfigured
Errors were encountered while processing:
 nvidia-driver
"""
DPKG_STANDIN = """#!/bin/bash
# dpkg and dpkg-query as they answer in the recorded state until apt reinstalls the half-installed package.
echo "dpkg $*" >> "$STATE/calls"
fixed() { [ -f "$STATE/fixed" ]; }
case "$(basename "$0") $*" in
  "dpkg --audit") fixed || cat "$STATE/audit" ;;
  "dpkg --configure -a") fixed || { cat "$STATE/configure" >&2; exit 1; } ;;
  dpkg-query*) fixed && echo "ii  nvidia-driver" || printf 'iHR xserver-xorg-video-nvidia\niU  nvidia-driver\n' ;;
esac
"""
APT_STANDIN = """#!/bin/bash
# apt-get: -f install only configures again (apt keeps a reinstall-required package at its version) and fails
# as dpkg does; --reinstall of the half-installed package repairs it.
echo "apt-get $*" >> "$STATE/calls"
case "$*" in
  update) exit 0 ;;
  "-f install -y") echo "E: Sub-process /usr/bin/dpkg returned an error code (1)" >&2; exit 100 ;;
  "install --reinstall -y xserver-xorg-video-nvidia") touch "$STATE/fixed" ;;
  *) exit 100 ;;
esac
"""


def test_a_stop_during_apts_unpack_is_repaired_not_retried_forever(tmp_path):
    """`dpkg --configure -a` can never configure a package whose dependency a stop left half-installed: the
    recovery reinstalls that package through apt, and provisioning goes on."""
    bin_dir, state = tmp_path / "bin", tmp_path / "state"
    bin_dir.mkdir()
    state.mkdir()
    (state / "audit").write_text(DPKG_AUDIT_HALF_INSTALLED)
    (state / "configure").write_text(DPKG_CONFIGURE_DEPENDENCY_PROBLEMS)
    for name, text in (("dpkg", DPKG_STANDIN), ("dpkg-query", DPKG_STANDIN), ("apt-get", APT_STANDIN),
                       ("sleep", "#!/bin/sh\nexit 0\n")):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    (tmp_path / "updates").mkdir()  # dpkg's journal, replayed
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "STATE": str(state),
           "DPKG_UPDATES_DIR": str(tmp_path / "updates")}
    script = REPO / "cloudinit" / "scripts" / "dpkg-recover.sh"
    result = run(["bash", str(script)], env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    calls = (state / "calls").read_text().splitlines()
    assert "apt-get install --reinstall -y xserver-xorg-video-nvidia" in calls
    assert calls.count("dpkg --configure -a") <= 3, "repaired at the first attempt, not retried"
    assert "reinstalling what dpkg left half-installed" in result.stdout
    # A consistent dpkg is left alone.
    (state / "calls").unlink()
    assert run(["bash", str(script)], env=env).returncode == 0
    assert (state / "calls").read_text().splitlines() == ["dpkg --audit"]


def test_cloud_init_runs_no_local_stage_on_the_booted_vm():
    bootstrap = (REPO / "cloudinit" / "bootstrap.sh").read_text()
    stages = next(line for line in bootstrap.splitlines() if line.startswith("for stage in"))
    assert "--local" not in stages and '"init"' in stages and '"modules --mode=final"' in stages


def test_preflight_refuses_unclamped_or_unfit():
    text = (REPO / "cloudinit" / "scripts" / "preflight.sh").read_text()
    assert '-m turing_clamp check || refuse' in text
    assert '-m turing_clamp fit --strict' in text
    assert "sm_75" in text and "swapon" in text


def test_render_is_deterministic_and_ships_every_script_and_unit():
    settings = render.GuestSettings("gemma4-data", 16)
    text = render.render_user_data(settings)
    assert text == render.render_user_data(settings)
    assert render.render_serving_env(["--model", "m"]) == render.render_serving_env(["--model", "m"])
    paths = {f["path"] for f in yaml.safe_load(text)["write_files"]}
    assert {f"{render.LIB_DIR}/{s.name}" for s in render.guest_scripts()} <= paths
    assert {f"{render.UNIT_DIR}/{u.name}" for u in UNITS} <= paths


def _serve(tmp_path, vllm_args: str) -> subprocess.CompletedProcess:
    """serve.sh as the unit runs it, with VLLM_ARGS as systemd hands it over, and a stand-in for the venv's
    python: `-m vllm...` prints the argv vLLM would get (as JSON); anything else (serve.sh's own shlex
    split) is the real python."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    python = venv / "bin" / "python"
    python.write_text(f'#!/bin/sh\nif [ "$1" = -m ]; then shift 2; exec {sys.executable} -c '
                      f'"import json, sys; print(json.dumps(sys.argv[1:]))" "$@"; fi\nexec {sys.executable} "$@"\n')
    python.chmod(0o755)
    env = {"PATH": os.environ["PATH"], "VENV": str(venv), "HF_HOME": str(tmp_path / "hf"), "VLLM_ARGS": vllm_args}
    return subprocess.run(["bash", str(REPO / "cloudinit" / "scripts" / "serve.sh")], env=env, capture_output=True,
                          text=True)


def test_a_vllm_argument_with_a_space_reaches_vllm_whole(tmp_path):
    """The producer (components/gce/guest.py) writes the line, systemd passes it as written (an unquoted start,
    no backslash: src/basic/env-file.c's VALUE state), serve.sh splits it into an array: a value with a space
    is one argument, and a glob is not expanded."""
    args = ["--model", "google/gemma-4-E2B-it", "--served-model-name", "gemma 4", "--chat-template", "*.jinja",
            "--override-generation-config", '{"temperature": 0.7}']
    env_file = render.render_serving_env(args)
    line = next(v for v in env_file.splitlines() if v.startswith("VLLM_ARGS=")).split("=", 1)[1]
    assert not line.startswith(("'", '"')) and "\\" not in line
    (tmp_path / "a.jinja").write_text("")
    served = _serve(tmp_path, line)
    assert served.returncode == 0, served.stderr
    assert json.loads(served.stdout.splitlines()[-1]) == args


def test_vllm_args_systemd_would_change_are_refused(tmp_path):
    for args in (["--model", "a\\b"], ["--model", "two\nlines"], ["it's", "--model", "m"]):
        with pytest.raises(ValueError, match="backslash or a line break"):
            render.vllm_env(args)
    broken = _serve(tmp_path, "--model 'unclosed")
    assert broken.returncode == 1 and "VLLM_ARGS is not a line of quoted arguments" in broken.stderr


# --- the data disk ---------------------------------------------------------------------------


def _loop_device(image: Path) -> str:
    if os.geteuid() != 0:
        pytest.skip("attaching a loop device needs root")
    result = run(["losetup", "--find", "--show", str(image)])
    if result.returncode != 0:
        pytest.skip(f"no loop device on this machine: {result.stderr.strip()}")
    return result.stdout.strip()


@pytest.fixture
def blank_disk(tmp_path):
    image = tmp_path / "disk.img"
    with image.open("wb") as f:
        f.truncate(64 * 1024 * 1024)
    device = _loop_device(image)
    yield device
    subprocess.run(["umount", "-l", str(tmp_path / "mnt")], capture_output=True)
    subprocess.run(["losetup", "-d", device], capture_output=True)


def _setup_disk(device: str, mountpoint: Path, fstab: Path) -> subprocess.CompletedProcess:
    return run(["bash", str(DISK_SCRIPT), device, str(mountpoint)], env={**os.environ, "FSTAB": str(fstab)})


def test_data_disk_formats_once_mounts_and_keeps_data_across_runs(blank_disk, tmp_path):
    require_tool("mkfs.ext4")
    mountpoint, fstab = tmp_path / "mnt", tmp_path / "fstab"
    fstab.write_text("# test fstab\n")
    first = _setup_disk(blank_disk, mountpoint, fstab)
    assert first.returncode == 0, first.stderr
    assert "creating ext4" in first.stdout
    fs_uuid = run(["blkid", "-o", "value", "-s", "UUID", blank_disk]).stdout.strip()
    (mountpoint / "checkpoint.safetensors").write_text("weights")

    subprocess.run(["umount", str(mountpoint)], check=True)  # as after a reboot
    second = _setup_disk(blank_disk, mountpoint, fstab)
    assert second.returncode == 0, second.stderr
    assert "keeping its data" in second.stdout and "creating" not in second.stdout
    third = _setup_disk(blank_disk, mountpoint, fstab)  # already mounted: nothing to do
    assert third.returncode == 0 and "already mounted" in third.stdout

    assert (mountpoint / "checkpoint.safetensors").read_text() == "weights"
    assert run(["blkid", "-o", "value", "-s", "UUID", blank_disk]).stdout.strip() == fs_uuid
    lines = [line for line in fstab.read_text().splitlines() if not line.startswith("#")]
    assert lines == [f"UUID={fs_uuid} {mountpoint} ext4 discard,defaults,nofail 0 2"]


def test_data_disk_with_a_foreign_filesystem_is_never_touched(tmp_path):
    require_tool("mkfs.ext4")
    image = tmp_path / "other.img"
    with image.open("wb") as f:
        f.truncate(16 * 1024 * 1024)
    result = run(["mkswap", str(image)])  # any signature that is not ext4
    assert result.returncode == 0, result.stderr
    before = image.read_bytes()
    refused = _setup_disk(str(image), tmp_path / "mnt", tmp_path / "fstab")
    assert refused.returncode == TERMINAL, "no retry formats it: provisioning stops retrying and says so"
    assert "refusing to touch it" in refused.stderr
    assert image.read_bytes() == before
    assert not (tmp_path / "fstab").exists()


def test_data_disk_refuses_a_mountpoint_fstab_already_uses(tmp_path):
    require_tool("mkfs.ext4")
    image = tmp_path / "disk.img"
    with image.open("wb") as f:
        f.truncate(16 * 1024 * 1024)
    assert run(["mkfs.ext4", "-q", "-F", str(image)]).returncode == 0
    fstab = tmp_path / "fstab"
    fstab.write_text(f"UUID={uuidlib.uuid4()} {tmp_path / 'mnt'} ext4 defaults 0 2\n")
    refused = _setup_disk(str(image), tmp_path / "mnt", fstab)
    assert refused.returncode == TERMINAL and "already mounts something else" in refused.stderr


# --- swap ------------------------------------------------------------------------------------


def _setup_swap(swapfile: Path, size_gb: int, fstab: Path) -> subprocess.CompletedProcess:
    # ACTIVATE=0: a container cannot swapon; the file, its signature and fstab are what persist.
    env = {**os.environ, "FSTAB": str(fstab), "ACTIVATE": "0"}
    return run(["bash", str(SWAP_SCRIPT), str(swapfile), str(size_gb)], env=env)


def test_swapfile_is_created_once_and_listed_in_fstab_once(tmp_path):
    require_tool("mkswap")
    swapfile, fstab = tmp_path / "swapfile", tmp_path / "fstab"
    first = _setup_swap(swapfile, 1, fstab)
    assert first.returncode == 0, first.stderr
    assert "setup-swap: created" in first.stdout
    assert swapfile.stat().st_size == 1024**3
    assert oct(swapfile.stat().st_mode & 0o777) == "0o600"
    assert run(["blkid", "-o", "value", "-s", "TYPE", str(swapfile)]).stdout.strip() == "swap"
    inode = swapfile.stat().st_ino

    second = _setup_swap(swapfile, 1, fstab)
    assert second.returncode == 0, second.stderr
    assert "setup-swap: created" not in second.stdout and swapfile.stat().st_ino == inode
    assert fstab.read_text().splitlines() == [f"{swapfile} none swap sw,nofail 0 0"]


def test_swapfile_of_the_wrong_size_is_rebuilt(tmp_path):
    swapfile, fstab = tmp_path / "swapfile", tmp_path / "fstab"
    swapfile.write_bytes(b"\0" * 4096)
    result = _setup_swap(swapfile, 1, fstab)
    assert result.returncode == 0 and "setup-swap: created" in result.stdout
    assert swapfile.stat().st_size == 1024**3


def test_swap_size_zero_does_nothing(tmp_path):
    result = _setup_swap(tmp_path / "swapfile", 0, tmp_path / "fstab")
    assert result.returncode == 0
    assert not (tmp_path / "swapfile").exists() and not (tmp_path / "fstab").exists()


def test_a_new_swap_size_replaces_the_swapfile_and_zero_removes_it(tmp_path):
    """swapSizeGb changed on a running VM (guest_bundle.py runs provisioning again): the new size is made beside
    the old file and takes its name; 0 removes the file and its fstab line, leaving the other lines."""
    require_tool("mkswap")
    swapfile, fstab = tmp_path / "swapfile", tmp_path / "fstab"
    fstab.write_text("UUID=1234 /opt1 ext4 defaults 0 2\n")
    assert _setup_swap(swapfile, 1, fstab).returncode == 0
    bigger = _setup_swap(swapfile, 2, fstab)
    assert bigger.returncode == 0 and "created" in bigger.stdout, bigger.stderr
    assert swapfile.stat().st_size == 2 * 1024**3 and not (tmp_path / "swapfile.new").exists()
    assert fstab.read_text().count(str(swapfile)) == 1
    removed = _setup_swap(swapfile, 0, fstab)
    assert removed.returncode == 0 and "removed" in removed.stdout
    assert not swapfile.exists() and fstab.read_text() == "UUID=1234 /opt1 ext4 defaults 0 2\n"




SWAP_STANDIN = """#!/bin/sh
# swapon/swapoff as util-linux's answer them, over a list of active swapfiles in $SWAPS (one a line), each call
# logged to $SWAPS.log; a container cannot swap.
case "$(basename "$0") $1" in
  "swapon --show=NAME") cat "$SWAPS" 2>/dev/null ;;
  "swapon "*) echo "$1" >>"$SWAPS"; echo "swapon $1" >>"$SWAPS.log" ;;
  "swapoff "*) grep -vxF "$1" "$SWAPS" >"$SWAPS.new"; mv "$SWAPS.new" "$SWAPS"; echo "swapoff $1" >>"$SWAPS.log" ;;
esac
"""


def test_a_new_size_of_an_active_swapfile_goes_in_the_other_slot_switched_on_first(tmp_path):
    """The kernel refuses to rename, remove or write an active swapfile (EPERM): a new swapSizeGb on a running VM
    makes the other slot, switches it on, then the old one off, and fstab names the new one; again, and back."""
    require_tool("mkswap")
    bin_dir, swapfile, fstab = tmp_path / "bin", tmp_path / "swapfile", tmp_path / "fstab"
    bin_dir.mkdir()
    for name in ("swapon", "swapoff"):
        (bin_dir / name).write_text(SWAP_STANDIN)
        (bin_dir / name).chmod(0o755)
    env = {**os.environ, "FSTAB": str(fstab), "SWAPS": str(tmp_path / "swaps"),
           "PATH": f"{bin_dir}:{os.environ['PATH']}"}

    def setup(size_gb: int) -> subprocess.CompletedProcess:
        result = run(["bash", str(SWAP_SCRIPT), str(swapfile), str(size_gb)], env=env)
        assert result.returncode == 0, result.stdout + result.stderr
        return result

    setup(1)
    assert (tmp_path / "swaps").read_text().split() == [str(swapfile)]
    (tmp_path / "swaps.log").unlink()
    setup(2)
    second = f"{swapfile}.2"
    assert (tmp_path / "swaps.log").read_text().split("\n")[:2] == [f"swapon {second}", f"swapoff {swapfile}"]
    assert (tmp_path / "swaps").read_text().split() == [second] and not swapfile.exists()
    assert Path(second).stat().st_size == 2 * 1024**3
    assert fstab.read_text() == f"{second} none swap sw,nofail 0 0\n"
    assert "exists (2G)" in setup(2).stdout, "the same size again: nothing to do"
    setup(1)
    assert (tmp_path / "swaps").read_text().split() == [str(swapfile)] and not Path(second).exists()
    assert fstab.read_text() == f"{swapfile} none swap sw,nofail 0 0\n"


def test_preflight_refuses_fewer_gpus_than_tensor_parallel_ranks(tmp_path):
    """A VM that comes back with fewer GPUs than --tensor-parallel-size gets the reason from the
    preflight, not a failure deep inside vLLM's start."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "nvidia-smi").write_text("#!/bin/sh\necho 'Tesla T4, 7.5'\n")
    (bin_dir / "nvidia-smi").chmod(0o755)
    script = REPO / "cloudinit" / "scripts" / "preflight.sh"
    state = tmp_path / "state"
    state.mkdir()
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "VENV": str(tmp_path / "venv"),
           "SWAP_SIZE_GB": "0", "DATA_MOUNT": "/", "STATE_DIRECTORY": str(state),
           "GEMMA4_T4_PROVISIONED": str(tmp_path / "provisioned")}
    two = run(["bash", str(script)], env={**env, "VLLM_ARGS": "--model m --tensor-parallel-size 2"})
    assert two.returncode == 1
    assert "--tensor-parallel-size 2 but nvidia-smi lists 1 GPU(s)" in two.stderr
    assert not (state / "refused").exists(), "while provisioning runs, a refusal may still heal"
    (tmp_path / "provisioned").touch()
    two = run(["bash", str(script)], env={**env, "VLLM_ARGS": "--model m --tensor-parallel-size 2"})
    assert two.returncode == 1 and "GPU(s)" in (state / "refused").read_text(), "no retry heals it: said so"
    one = run(["bash", str(script)], env={**env, "VLLM_ARGS": "--model m --tensor-parallel-size 1"})
    assert "GPU(s)" not in one.stderr and "GPU: Tesla T4, 7.5" in one.stdout
    assert not (state / "refused").exists(), "a later check that fails in a way that heals clears it"


def test_the_boot_tests_leftovers_hold_no_device_nodes_and_a_pass_leaves_none(tmp_path):
    """A failed boot keeps its evidence without device nodes or the data disk's image; a pass deletes it all."""
    import os
    import stat

    from test_guest_boot import BOOT_WORK, clean_boot_work

    assert not BOOT_WORK.resolve().is_relative_to(REPO), "the boot test's images must live outside the checkout"
    failed = tmp_path / "failed"
    (failed / "vm1" / "dev").mkdir(parents=True)
    os.mknod(failed / "vm1" / "dev" / "null", 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    (failed / "vm1.console").write_text("boot log")
    (failed / "data-disk.img").write_bytes(b"\0")
    assert "1 device nodes removed" in clean_boot_work(failed, passed=False)
    assert not (failed / "vm1" / "dev" / "null").exists() and not (failed / "data-disk.img").exists()
    assert (failed / "vm1.console").read_text() == "boot log"
    passed = tmp_path / "passed"
    (passed / "vm1").mkdir(parents=True)
    clean_boot_work(passed, passed=True)
    assert not passed.exists()


# --- the boot test's own failure path ----------------------------------------------------------


class _StoppedVM:
    """What wait_for reads of a VM: its journal per unit, and whether it stopped."""

    def __init__(self) -> None:
        import threading

        self.stopped = threading.Event()
        self.stopped.set()

    def journal(self, unit: str) -> str:
        return "".join(f"{unit} line {n}\n" for n in range(100))


def test_a_boot_tests_timeout_shows_each_units_journal_tail():
    from test_guest_boot import wait_for

    with pytest.raises(AssertionError) as failed:
        wait_for("vLLM healthy", lambda: False, 5, _StoppedVM(), interval=0)  # type: ignore[arg-type]
    text = str(failed.value)
    assert "waiting for vLLM healthy" in text
    for unit in ("google-startup-scripts", "gemma4-t4-provision", "gemma4-vllm"):
        assert f"--- {unit} (last 40 lines) ---" in text and f"{unit} line 99" in text
        assert f"{unit} line 59\n" not in text


TEARDOWN_CHILD = """
import sys, time
sys.path.insert(0, sys.argv[1])
from guest import harness
teardown = harness.Teardown()
teardown.add(lambda: open(sys.argv[2], "a").write("network\\n"))
teardown.add(lambda: open(sys.argv[2], "a").write("machines\\n"))
print("ready", flush=True)
time.sleep(60)
"""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_killed_boot_test_ends_what_it_started(tmp_path, sig):
    """Killed by CI's timeout or a Ctrl-C, the boot test still ends its machines first, then the rest, and dies of
    the signal. (SIGINT is set to be ignored for a background job: the handler must take it anyway.)"""
    log = tmp_path / "teardown.log"
    child = subprocess.Popen([sys.executable, "-c", TEARDOWN_CHILD, str(REPO / "tests"), str(log)],
                             stdout=subprocess.PIPE, text=True, preexec_fn=lambda: signal.signal(signal.SIGINT,
                                                                                                 signal.SIG_IGN))
    assert child.stdout is not None and child.stdout.readline().strip() == "ready"
    child.send_signal(sig)
    assert child.wait(30) == -sig
    assert log.read_text().splitlines() == ["machines", "network"]


def test_a_second_boot_test_is_refused_with_the_holders_pid(tmp_path):
    from guest import harness

    lock = tmp_path / "boot-test.lock"
    with (harness.only_boot_test(lock), pytest.raises(harness.BootTestBusy, match=f"pid {os.getpid()} holds"),
          harness.only_boot_test(lock)):
        pass
    with harness.only_boot_test(lock):  # released with the first
        pass


def test_a_boot_test_without_room_is_refused_before_it_boots(tmp_path, monkeypatch):
    from guest import harness

    usage = shutil.disk_usage(tmp_path)
    monkeypatch.setattr(harness.shutil, "disk_usage", lambda _: usage._replace(free=int(2.5 * 1024**3)))
    with pytest.raises(harness.NotEnoughSpace) as refused:
        harness.require_free_space(tmp_path / "boot", 12, "GEMMA4_T4_BOOT_WORK")
    assert str(refused.value) == (
        f"the boot test needs about 12 GiB free where it boots ({tmp_path / 'boot'}: its VM roots and the data disk's "
        "image); that filesystem has 2.5 GiB free. Free space there, or set GEMMA4_T4_BOOT_WORK to a folder on a "
        "filesystem with room")
    harness.require_free_space(tmp_path / "boot", 2, "GEMMA4_T4_BOOT_WORK")  # enough: no refusal


# --- a venv per vLLM version ---------------------------------------------------------------------


def _serving_from(tmp_path: Path, venv: Path) -> subprocess.Popen:
    """A process that has a file of VENV mapped, as vLLM has its venv's libraries."""
    program = venv / "bin" / "python"
    shutil.copy(shutil.which("sleep") or "/bin/sleep", program)
    return subprocess.Popen([str(program), "60"])


def _prune(tmp_path: Path, pid: int, healthy: bool = True) -> subprocess.CompletedProcess:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "curl").write_text(f"#!/bin/sh\nexit {0 if healthy else 7}\n")
    (bin_dir / "systemctl").write_text(f"#!/bin/sh\necho {pid}\n")
    for tool in ("curl", "systemctl"):
        (bin_dir / tool).chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "VENV": str(tmp_path / "vllm" / "current"),
           "METRICS_URL": "http://127.0.0.1:8000/metrics", "PRUNE_WAIT_S": "0"}
    return run(["bash", str(REPO / "cloudinit" / "scripts" / "prune-venvs.sh")], env=env)


def test_old_venvs_go_only_once_vllm_serves_from_the_new_one(tmp_path):
    """An upgrade's new venv sits beside the old (and beside 0.2.0's vllm/venv): both stay while vLLM is not
    healthy or still runs from the old one, and go once it serves from the new one."""
    vllm = tmp_path / "vllm"
    for name in ("venv", "venv-0.30.0-aaaaaaaaaaaa", "venv-0.33.0-bbbbbbbbbbbb"):
        (vllm / name / "bin").mkdir(parents=True)
    new = vllm / "venv-0.33.0-bbbbbbbbbbbb"
    (vllm / "current").symlink_to(new)
    old_server = _serving_from(tmp_path, vllm / "venv-0.30.0-aaaaaaaaaaaa")
    try:
        kept = _prune(tmp_path, old_server.pid)
        assert kept.returncode == 0 and "keeping every venv" in kept.stdout
        assert sorted(p.name for p in vllm.iterdir() if p.name != ".venvs.lock") == ["current", "venv", "venv-0.30.0-aaaaaaaaaaaa",
                                                          "venv-0.33.0-bbbbbbbbbbbb"]
    finally:
        old_server.kill()
    new_server = _serving_from(tmp_path, new)
    try:
        assert _prune(tmp_path, new_server.pid, healthy=False).returncode == 0
        assert (vllm / "venv").exists(), "not healthy yet: nothing removed"
        pruned = _prune(tmp_path, new_server.pid)
    finally:
        new_server.kill()
    assert pruned.returncode == 0, pruned.stderr
    assert sorted(p.name for p in vllm.iterdir() if p.name != ".venvs.lock") == ["current", "venv-0.33.0-bbbbbbbbbbbb"]
    assert f"removing {vllm / 'venv'}" in pruned.stdout


def test_a_venv_being_installed_is_not_pruned_while_the_old_one_serves(tmp_path):
    """A vLLM version change on a running VM: install-vllm.sh makes the new venv beside the old one while the old vLLM
    still serves, and $VENV names the new one only once it is whole. A prune that starts meanwhile (vLLM healthy from
    the venv $VENV names) waits for the install's lock, sees $VENV switched, and removes nothing (the boot test met the
    new venv removed mid-install, and the install failing on its missing python, again and again)."""
    vllm = tmp_path / "vllm"
    old, new = vllm / "venv-0.30.0-aaaaaaaaaaaa", vllm / "venv-0.33.0-bbbbbbbbbbbb"
    for venv in (old, new):
        (venv / "bin").mkdir(parents=True)
    (vllm / "current").symlink_to(old)
    install = (REPO / "cloudinit" / "scripts" / "install-vllm.sh").read_text()
    assert 'exec 9>"$(dirname "$VENV")/.venvs.lock"\nflock 9\n' in install, "the install holds the venvs' lock"
    lock = vllm / ".venvs.lock"
    installing = subprocess.Popen(["flock", str(lock), "sh", "-c", f"touch {tmp_path}/locked; sleep 2; "
                                   f"ln -sfn {new} {vllm}/current.new && mv -T {vllm}/current.new {vllm}/current"])
    old_server = _serving_from(tmp_path, old)
    try:
        while not (tmp_path / "locked").exists():
            time.sleep(0.05)
        pruned = _prune(tmp_path, old_server.pid)
    finally:
        old_server.kill()
        installing.wait(10)
    assert pruned.returncode == 0 and "keeping every venv" in pruned.stdout, pruned.stdout + pruned.stderr
    assert old.exists() and new.exists()


def test_the_service_runs_a_symlink_to_the_locks_own_venv():
    env = render.guest_env(render.GuestSettings("gemma4-data", 16))
    assert env["VENV"] == f"{render.DATA_MOUNT}/vllm/current"
    install = (REPO / "cloudinit" / "scripts" / "install-vllm.sh").read_text()
    assert 'target=$(dirname "$VENV")/venv-${version:-unknown}-${want:0:12}' in install
    assert '"${pip[@]}" install --require-hashes --no-deps' in install and 'pip=("$target/bin/python"' in install
    assert "Wants=gemma4-t4-venv-prune.service" in _unit_lines("gemma4-vllm.service")


def _venv_name(lock_text: str, tmp_path) -> str:
    """The venv install-vllm.sh installs LOCK_TEXT into: its own lines for the lock's identity and the venv's name,
    run as it runs them (bash, on the lock as the user-data writes it)."""
    install = (REPO / "cloudinit" / "scripts" / "install-vllm.sh").read_text().splitlines()
    lines = [next(line for line in install if line.startswith(f"{name}=")) for name in ("want", "version", "target")]
    lock = tmp_path / "vllm-lock.txt"
    lock.write_text(lock_text)
    done = run(["bash", "-euo", "pipefail", "-c", "\n".join([*lines, 'echo "${target##*/}"'])],
               env={**os.environ, "VLLM_LOCK": str(lock), "VENV": "/mnt/data/vllm/current"})
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_a_venv_is_the_locks_pins_not_its_comments(tmp_path):
    """A lock's new header (or resolver note) lands on the running VM without a new venv; a new pin or hash makes one."""
    text = render.lock_file("0.30.0").read_text()
    name = _venv_name(text, tmp_path)
    assert re.fullmatch(r"venv-0\.30\.0-[0-9a-f]{12}", name), name
    body = text.split("\n", 1)[1]
    assert _venv_name("# gemma4-t4 guest lock: another header\n# a note\n" + body, tmp_path) == name
    assert _venv_name(text.replace("aiosignal==1.4.0", "aiosignal==1.4.1"), tmp_path) != name


def test_a_failure_no_retry_heals_is_one_exit_status_and_one_verdict_file_everywhere():
    """The guest's word for "trying again cannot help" must mean the same to each part that says or reads it:
    provision.sh's TERMINAL, its unit's RestartPreventExitStatus (systemd then stops retrying), the steps that
    exit with it; and the preflight's refusal file, which progress.py reads, in the vLLM unit's StateDirectory."""
    scripts, units = REPO / "cloudinit" / "scripts", REPO / "cloudinit" / "units"
    assert f"TERMINAL={TERMINAL}\n" in (scripts / "provision.sh").read_text()
    assert f"\nRestartPreventExitStatus={TERMINAL}\n" in (units / "gemma4-t4-provision.service").read_text()
    assert f"exit {TERMINAL}" in (scripts / "install-vllm.sh").read_text()
    assert f"exit {TERMINAL}; }}" in DISK_SCRIPT.read_text()
    state_dir = re.search(r"^StateDirectory=(\S+)$", (units / "gemma4-vllm.service").read_text(), re.M).group(1)
    assert f"VERDICT=${{STATE_DIRECTORY:-/var/lib/{state_dir}}}/refused\n" in (scripts / "preflight.sh").read_text()
    assert f'REFUSED = "/var/lib/{state_dir}/refused"' in (scripts / "progress.py").read_text()
    assert f"rm -f /var/lib/{state_dir}/refused\n" in (scripts / "provision.sh").read_text(), "a new run forgets it"
    # The preflight refuses for good only after this boot's provisioning has finished: the mark provision.sh makes.
    mark = re.search(r"^provisioned_mark=(\S+)$", (scripts / "provision.sh").read_text(), re.M).group(1)
    assert f"PROVISIONED=${{GEMMA4_T4_PROVISIONED:-{mark}}}\n" in (scripts / "preflight.sh").read_text()
