"""A GCE VM stood in on this machine: a Debian 13 root filesystem booted by systemd-nspawn, in a
network namespace of its own (tests/guest/net.py serves its world there), with a loop device as
its data disk at /dev/disk/by-id/google-<deviceName>.

What the test root filesystem adds to a plain Debian 13 (everything else is the plan's):
- /etc/hosts for the stood-in hosts (on GCE the VPC's resolver answers for them);
- a startup-script runner: Google's guest agent runs `startup-script` from the metadata server
  at every boot (google-startup-scripts.service); this unit does the same with curl;
- the DMI answer of a GCE VM for cloud-init: cloud-init reads no DMI inside a container at all,
  so its GCE datasource would refuse to run; a .pth hook answers "Google Compute Engine";
- pip's index: the wheelhouse (no-index + find-links), the host's one copy of the lock's wheels;
- the test CA, for the NVIDIA stand-in's TLS;
- libnuma1, which vLLM's CPU build (the stand-in for the CUDA build) needs. No g++: the GCE image
  has none, and the guest installs it (Inductor compiles C++ when a graph needs it).

What it keeps of the Debian 13 GCE image's conditions (source: the image's apt setup as a VM shows it,
read in an earlier review; Debian's unattended-upgrades package and apt's own apt-daily units):
- unattended-upgrades installed and enabled (/etc/apt/apt.conf.d/20auto-upgrades), apt's daily
  services ordered after the startup-script unit (Google's unit is Before=apt-daily.service) and, here,
  started at every boot right after it with no random sleep, so they hold apt's lock just as
  provisioning starts (on the VM the timers do so at a random time; the test makes it certain);
- the sources trixie, trixie-updates and trixie-backports (trixie-security is left out: the stand-in
  network passes only the mirror's /debian through).
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

HERE = Path(__file__).resolve().parent
SUITE = "trixie"
PACKAGES = ["systemd", "systemd-sysv", "udev", "python3", "curl", "ca-certificates", "e2fsprogs", "kmod",
            "procps", "libnuma1", "unattended-upgrades"]
SOURCES = "".join(f"deb http://deb.debian.org/debian {suite} main\n"
                  for suite in ("trixie", "trixie-updates", "trixie-backports"))
# source: Debian's unattended-upgrades (its README: 20auto-upgrades turns on the daily list update and
# the upgrade); RandomSleep 0 is the test's own, so apt's lock is held when provisioning starts.
AUTO_UPGRADES = ('APT::Periodic::Update-Package-Lists "1";\nAPT::Periodic::Unattended-Upgrade "1";\n'
                 'APT::Periodic::RandomSleep "0";\n')
HOSTS = {"169.254.169.254": "metadata.google.internal metadata", "127.0.0.2": "deb.debian.org",
         "127.0.0.3": "developer.download.nvidia.com", "127.0.0.4": "wheels.gemma4-t4.test"}
REBOOT_EXIT = 133  # systemd-nspawn's exit status when the container reboots

STARTUP_RUNNER = """#!/bin/sh
# Test stand-in for Google's guest agent: run the instance's startup-script on every boot.
url=http://metadata.google.internal/computeMetadata/v1/instance/attributes/startup-script
script=$(mktemp)
curl -fsS --retry 10 --retry-connrefused -H 'Metadata-Flavor: Google' -o "$script" "$url" || exit 0
echo "startup-script: running"
bash "$script"
rc=$?
echo "startup-script: exit status $rc"
rm -f "$script"
exit 0
"""

STARTUP_UNIT = """[Unit]
Description=Google Compute Engine Startup Scripts (boot-test stand-in)
Wants=network-online.target
After=network-online.target
Before=apt-daily.service apt-daily-upgrade.service

[Service]
Type=oneshot
ExecStart=/usr/local/sbin/gce-startup-script-runner
TimeoutStartSec=0
StandardOutput=journal+console

[Install]
WantedBy=multi-user.target
"""

DMI_HOOK = """import sys
if sys.argv and sys.argv[0].endswith("cloud-init"):
    # A GCE VM's DMI, which cloud-init does not read inside a container (boot-test stand-in).
    import cloudinit.dmi as _dmi
    _read = _dmi.read_dmi_data
    _gce = {"system-product-name": "Google Compute Engine", "system-serial-number": "GoogleCloud-BOOTTEST"}
    _dmi.read_dmi_data = lambda key: _gce.get(key) or _read(key)
"""


# pip's index on the VM is PyPI; here it is the host's wheelhouse, over plain HTTP on the namespace.
PIP_CONF = """[global]
no-index = true
find-links = http://wheels.gemma4-t4.test/
trusted-host = wheels.gemma4-t4.test
"""


def host_debian_mirror() -> str:
    """The Debian mirror this machine's apt uses (deb822 or one-line sources)."""
    for path in [*sorted(Path("/etc/apt").glob("sources.list.d/*.sources")), Path("/etc/apt/sources.list")]:
        if not path.is_file():
            continue
        text = path.read_text()
        for match in re.finditer(r"^URIs:\s*(\S+)", text, re.M):
            if "security" not in match[1]:
                return match[1]
        for match in re.finditer(r"^deb\s+(?:\[[^]]*\]\s+)?(\S+)\s", text, re.M):
            if "security" not in match[1]:
                return match[1]
    raise RuntimeError("no Debian mirror in /etc/apt: the boot test reads the one this machine's apt uses")


def rootfs_tarball(cache: Path) -> Path:
    """Debian 13 with the test's additions, built once per content (mmdebstrap) and cached."""
    spec = json.dumps([SUITE, PACKAGES, HOSTS, STARTUP_RUNNER, STARTUP_UNIT, DMI_HOOK, PIP_CONF, SOURCES, AUTO_UPGRADES])
    tarball = cache / f"debian13-{hashlib.sha256(spec.encode()).hexdigest()[:12]}.tar"
    if tarball.exists():
        return tarball
    cache = cache.resolve()
    tarball = tarball.resolve()
    cache.mkdir(parents=True, exist_ok=True)
    staging = cache / "staging"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    (staging / "hosts").write_text("127.0.0.1 localhost\n" + "".join(f"{a} {n}\n" for a, n in HOSTS.items()))
    (staging / "runner").write_text(STARTUP_RUNNER)
    (staging / "unit").write_text(STARTUP_UNIT)
    (staging / "dmi.py").write_text(DMI_HOOK)
    (staging / "pip.conf").write_text(PIP_CONF)
    (staging / "sources.list").write_text(SOURCES)
    (staging / "20auto-upgrades").write_text(AUTO_UPGRADES)
    hooks = [
        f'cp {staging}/hosts "$1/etc/hosts"',
        f'install -m 0755 {staging}/runner "$1/usr/local/sbin/gce-startup-script-runner"',
        f'cp {staging}/unit "$1/etc/systemd/system/google-startup-scripts.service"',
        'ln -s /etc/systemd/system/google-startup-scripts.service '
        '"$1/etc/systemd/system/multi-user.target.wants/google-startup-scripts.service"',
        f'cp {staging}/dmi.py "$1/usr/lib/python3/dist-packages/_gce_dmi_standin.py"',
        'echo "import _gce_dmi_standin" > "$1/usr/lib/python3/dist-packages/_gce_dmi_standin.pth"',
        f'cp {staging}/pip.conf "$1/etc/pip.conf"',
        f'cp {staging}/sources.list "$1/etc/apt/sources.list"',
        f'cp {staging}/20auto-upgrades "$1/etc/apt/apt.conf.d/20auto-upgrades"',
        # apt's daily services at every boot, after the startup-script unit (as its timers may on the VM)
        *(f'ln -sf /usr/lib/systemd/system/{unit} "$1/etc/systemd/system/multi-user.target.wants/{unit}"'
          for unit in ("apt-daily.service", "apt-daily-upgrade.service")),
        'echo gemma4-t4 > "$1/etc/hostname"',
    ]
    partial = tarball.with_suffix(".partial.tar")  # mmdebstrap picks the format by suffix
    command = ["mmdebstrap", "--quiet", "--variant=minbase", f"--include={','.join(PACKAGES)}",
               *(f"--customize-hook={hook}" for hook in hooks), SUITE, str(partial), host_debian_mirror()]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"mmdebstrap failed:\n{result.stderr[-3000:]}")
    partial.rename(tarball)
    shutil.rmtree(staging)
    return tarball


def sh(*cmd: str, check: bool = True, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(list(cmd), capture_output=True, text=True, check=check, **kwargs)


class Network:
    """The namespace and the world in it (net.py as a child process)."""

    def __init__(self, name: str, state: Path, metadata: dict, nvidia_repo: Path, wheelhouse: Path,
                 tls: tuple[Path, Path], guest_port: int, hub_repos: dict[str, str] | None = None,
                 mirror_bytes_per_s: float = 0):
        self.name, self.state = name, state
        state.mkdir(parents=True, exist_ok=True)
        sh("ip", "netns", "add", name)
        sh("ip", "-n", name, "link", "set", "lo", "up")
        sh("ip", "-n", name, "addr", "add", "169.254.169.254/32", "dev", "lo")
        config = {"netns": name, "state_dir": str(state), "metadata": metadata, "debian_mirror": host_debian_mirror(),
                  "nvidia_repo": str(nvidia_repo), "nvidia_prefix": "/compute/cuda/repos/debian13/x86_64",
                  "wheelhouse": str(wheelhouse), "tls_cert": str(tls[0]), "tls_key": str(tls[1]),
                  "guest_port": guest_port, "hub_repos": hub_repos or {}, "mirror_bytes_per_s": mirror_bytes_per_s}
        (state / "config.json").write_text(json.dumps(config))
        self.log = (state / "net.log").open("w")
        self.process = subprocess.Popen([sys.executable, str(HERE / "net.py"), str(state / "config.json")],
                                        stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 120  # the Hub's repos are hashed first (a benchmark's checkpoint: a GB)
        while not (state / "tunnel-port").exists():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise RuntimeError(f"the guest network did not start: {(state / 'net.log').read_text()}")
            time.sleep(0.2)
        self.tunnel_port = int((state / "tunnel-port").read_text())

    def set(self, flag: str, on: bool) -> None:
        path = self.state / flag
        if on:
            path.touch()
        else:
            path.unlink(missing_ok=True)

    def set_mirror_rate(self, bytes_per_s: float | None) -> None:
        """The wheels' and the Hub's link from now on (None: the config's again)."""
        path = self.state / "mirror-rate"
        if bytes_per_s is None:
            path.unlink(missing_ok=True)
        else:
            path.write_text(f"{bytes_per_s:.0f}\n")

    def requests(self) -> list[str]:
        path = self.state / "requests.log"
        return path.read_text().splitlines() if path.exists() else []

    def set_instance_attribute(self, key: str, value: str) -> None:
        """Change one of the instance's metadata values, as `pulumi up` does (setMetadata, the VM running)."""
        config = json.loads((self.state / "config.json").read_text())
        path = self.state / "instance-attributes.json"
        attributes = json.loads(path.read_text()) if path.exists() else config["metadata"]["instance"]["attributes"]
        attributes[key] = value
        partial = path.with_suffix(".partial")
        partial.write_text(json.dumps(attributes))
        partial.rename(path)

    def guest_attribute_writes(self) -> list[dict]:
        """Every guest attribute the VM wrote, oldest first: {"t": epoch seconds, "key": "NS/KEY", "value": ...}."""
        path = self.state / "guest-attributes.log"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(10)
            if self.process.poll() is None:
                self.process.kill()
        self.log.close()
        sh("ip", "netns", "delete", self.name, check=False)


class DataDisk:
    """A sparse image on a loop device: the persistent disk that outlives each VM."""

    def __init__(self, image: Path, size_gb: int):
        self.image = image
        with image.open("wb") as f:
            f.truncate(size_gb * 1024**3)
        self.device = sh("losetup", "--find", "--show", str(image)).stdout.strip()

    def release_swap(self) -> None:
        """A container's swapon outlives it (systemd manages no swap in a container): switch it
        off from the host, through a mount of the same filesystem."""
        active = [line.split()[0] for line in Path("/proc/swaps").read_text().splitlines()[1:]]
        if not any("swapfile" in name for name in active):
            return
        mnt = self.image.with_suffix(".mnt")
        mnt.mkdir(exist_ok=True)
        # The same flags as the live (read-write) superblock: a read-only mount would be refused.
        if sh("mount", self.device, str(mnt), check=False).returncode == 0:
            try:
                for swapfile in mnt.glob("swapfile*"):  # either of setup-swap.sh's two slots
                    sh("swapoff", str(swapfile), check=False)
            finally:
                sh("umount", str(mnt), check=False)
        mnt.rmdir()

    @contextlib.contextmanager
    def mounted(self) -> Iterator[Path]:
        """The disk's filesystem, mounted on the host (no VM may have it attached)."""
        mnt = self.image.with_suffix(".mnt")
        mnt.mkdir(exist_ok=True)
        sh("mount", self.device, str(mnt))
        try:
            yield mnt
        finally:
            sh("umount", str(mnt))
            mnt.rmdir()

    def remove(self, relative: str) -> None:
        """Delete RELATIVE on the disk from the host (no VM may have it attached)."""
        mnt = self.image.with_suffix(".mnt")
        mnt.mkdir(exist_ok=True)
        sh("mount", self.device, str(mnt))
        try:
            target = (mnt / relative).resolve()
            assert target.is_relative_to(mnt.resolve()) and target != mnt.resolve(), target
            shutil.rmtree(target, ignore_errors=True)
        finally:
            sh("umount", str(mnt))
        mnt.rmdir()

    def close(self) -> None:
        self.release_swap()
        sh("losetup", "-d", self.device, check=False)


class VM:
    """One VM: a boot disk (a fresh root filesystem) and the shared data disk and network.
    Reboots from inside come back (nspawn exits 133: boot again); every boot's start is kept."""

    def __init__(self, name: str, root: Path, tarball: Path, disk: DataDisk, network: Network, device_name: str,
                 console: Path):
        self.name, self.root, self.disk, self.network = name, root, disk, network
        self.device_name, self.console_path = device_name, console
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir(parents=True)
        with tarfile.open(tarball) as tar:
            tar.extractall(root, filter="fully_trusted")
        self.boots: list[float] = []
        self.process: subprocess.Popen | None = None
        self.stopped = threading.Event()
        self._thread: threading.Thread | None = None

    def add_ca(self, pem: str) -> None:
        (self.root / "usr/local/share/ca-certificates/gemma4-t4-boot-test.crt").write_text(pem)
        with (self.root / "etc/ssl/certs/ca-certificates.crt").open("a") as bundle:
            bundle.write(pem)

    def _command(self) -> list[str]:
        return ["systemd-nspawn", "--quiet", "--boot", "--directory", str(self.root), "--machine", self.name,
                "--register=no", "--keep-unit", "--system-call-filter=@swap",
                f"--network-namespace-path=/run/netns/{self.network.name}",
                f"--bind={self.disk.device}", f"--bind={self.disk.device}:/dev/disk/by-id/google-{self.device_name}",
                "--console=read-only"]

    def start(self) -> None:
        def run():
            with self.console_path.open("a") as console:
                while not self.stopped.is_set():
                    self.boots.append(time.monotonic())
                    console.write(f"\n=== boot {len(self.boots)} of {self.name} ===\n")
                    console.flush()
                    env = {**os.environ, "SYSTEMD_NSPAWN_UNIFIED_HIERARCHY": "1"}
                    self.process = subprocess.Popen(self._command(), stdout=console, stderr=subprocess.STDOUT,
                                                    env=env, start_new_session=True)
                    code = self.process.wait()
                    self.disk.release_swap()
                    console.write(f"=== {self.name} exited with status {code} ===\n")
                    console.flush()
                    if code != REBOOT_EXIT:
                        break
            self.stopped.set()

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None and not self.stopped.is_set()

    def _leader(self) -> int | None:
        if not self.running():
            return None
        assert self.process is not None
        children = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children")
        with contextlib.suppress(OSError):
            pids = children.read_text().split()
            if pids:
                return int(pids[0])
        return None

    def exec(self, *cmd: str, timeout: float = 60) -> subprocess.CompletedProcess:
        """Run a command inside the running guest (its PID, mount and network namespaces)."""
        leader = self._leader()
        if leader is None:
            return subprocess.CompletedProcess(cmd, 255, "", "the guest is not running")
        # -r/-w: the guest's own root and working directory. Entering its mount namespace alone
        # lands at that namespace's root, which is the host's / when the test itself runs in a
        # chroot (systemd-nspawn moves the guest over its directory and chroots into it).
        return subprocess.run(["nsenter", "-t", str(leader), "-m", "-u", "-i", "-n", "-p", "-r", "-w", "--", *cmd],
                              capture_output=True, text=True, timeout=timeout)

    def journal(self, unit: str | None = None, boot: str = "all") -> str:
        args = ["--no-pager", "-o", "short-monotonic"]
        args += ["-u", unit] if unit else []
        args += [] if boot == "all" else ["-b", boot]
        result = self.exec("journalctl", *args)
        if result.returncode == 0:
            return result.stdout + result.stderr
        # Between two boots (a reboot the guest asked for, as provisioning does once the driver is built) there is no
        # guest to ask: its persistent journal is on its root, read from here (journalctl(1) --directory).
        files = self.root / "var" / "log" / "journal"
        if files.is_dir() and shutil.which("journalctl"):
            result = subprocess.run(["journalctl", f"--directory={files}", *args], capture_output=True, text=True,
                                    timeout=60)
        return result.stdout + result.stderr

    def shutdown(self, reboot: bool = False, timeout: float = 120) -> None:
        """A clean poweroff (or reboot) from inside, as the cloud does; kill if it hangs."""
        count = len(self.boots)
        self.exec("systemctl", "reboot" if reboot else "poweroff", "--no-block")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if (reboot and len(self.boots) > count and self.running()) or (not reboot and self.stopped.is_set()):
                return
            time.sleep(0.5)
        self.kill()
        raise TimeoutError(f"{self.name} did not {'reboot' if reboot else 'power off'} in {timeout:.0f} s")

    def power_cycle(self) -> None:
        """Stopped at once, as a preemption or a stop past its grace period ends a VM, then started again on
        the same boot disk."""
        self.kill()
        self.stopped.clear()
        self.start()

    def kill(self) -> None:
        """Stop at once, leaving nothing: the container's PID 1 first (SIGKILL to a PID
        namespace's init ends every process in it; killing nspawn alone would orphan them)."""
        leader = self._leader()
        self.stopped.set()
        if leader is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(leader, signal.SIGKILL)
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(30)
            if self.process.poll() is None:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(30)
        if self._thread is not None:
            self._thread.join(30)
        self.disk.release_swap()


class Teardown:
    """Ends what a boot test started, once, however the test ends: from the fixture's own cleanup, at the
    interpreter's exit, or on SIGTERM/SIGINT (a CI timeout, a Ctrl-C), which would otherwise leave its VMs
    running, the guest's swapfile active on the host (swap is the host kernel's), the loop device attached and
    the network namespace behind. Actions run last-added first; one that fails does not stop the others."""

    SIGNALS = (signal.SIGTERM, signal.SIGINT)

    def __init__(self) -> None:
        self.actions: list[Callable[[], object]] = []
        self.done = False
        atexit.register(self.run)
        self._previous = {sig: signal.signal(sig, self._on_signal) for sig in self.SIGNALS}

    def add(self, action: Callable[[], object]) -> None:
        self.actions.append(action)

    def run(self) -> None:
        if self.done:
            return
        self.done = True
        for sig, handler in self._previous.items():
            with contextlib.suppress(ValueError):  # only the main thread may set handlers
                signal.signal(sig, handler)
        while self.actions:
            action = self.actions.pop()
            try:
                action()
            except Exception as error:  # every action runs; say which failed
                print(f"boot test teardown: {getattr(action, '__name__', action)} failed: {error!r}", file=sys.stderr)

    def _on_signal(self, signum: int, frame: object) -> None:
        self.run()
        # Then die of the signal as if no handler had been set (the exit status says which).
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)


class BootTestBusy(RuntimeError):
    """Another boot test holds the machine's boot-test lock."""


class NotEnoughSpace(RuntimeError):
    """The boot test's folder is on a filesystem with too little room for its VM roots and data disk."""


def require_free_space(folder: Path, need_gib: float, setting: str) -> None:
    """Refuse to boot when FOLDER's filesystem has less than NEED_GIB free: a guest that runs out of room half-way
    fails at whatever step it was on (pip, a journal write, the next VM's root), far from the cause."""
    folder.mkdir(parents=True, exist_ok=True)
    free_gib = shutil.disk_usage(folder).free / 1024**3
    if free_gib < need_gib:
        raise NotEnoughSpace(
            f"the boot test needs about {need_gib:.0f} GiB free where it boots ({folder}: its VM roots and the data "
            f"disk's image); that filesystem has {free_gib:.1f} GiB free. Free space there, or set {setting} to a "
            f"folder on a filesystem with room")


@contextlib.contextmanager
def only_boot_test(lock: Path) -> Iterator[None]:
    """Hold LOCK while a boot test runs: a second one beside it would share the host's swap and loop devices
    and read the other's swapfile as its own leftover. Refused with the pid that holds it."""
    lock.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = lock.read_text().strip() or "unknown"
            raise BootTestBusy(f"another boot test is running (pid {holder} holds {lock}): wait for it to end, or "
                               f"end it (kill {holder}); its exit handler cleans up after it") from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        yield
    finally:
        os.close(fd)  # releases the lock
