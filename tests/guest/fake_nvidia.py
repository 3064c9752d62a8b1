"""NVIDIA's CUDA apt repository for Debian 13, stood in: the real package names, two driver
branches (the pinned one and a newer one, as the real repository carries), and programs that
behave like the driver's on a VM with a Tesla T4.

- signed as NVIDIA's is: InRelease and Release.gpg by a key made for the test (ed25519, gpg), published beside the
  index as KEY_FILE as NVIDIA publishes 8793F200.pub; build() returns its fingerprint, which the boot test pins in
  the guest in place of NVIDIA's (test.env's CUDA_REPO_KEY_FINGERPRINT). No source says trusted=yes: apt on the
  guest checks every index against the key the guest installed.
- cuda-keyring_1.1-1_all.deb (beside the index, as NVIDIA publishes it): what an earlier release's guest installed,
  unchecked. As NVIDIA's does ([gce-t4-article]: /etc/apt/sources.list.d/cuda-debian13-x86_64.list, "deb
  [signed-by=/usr/share/keyrings/cuda-archive-keyring.gpg] .../debian13/x86_64/ /"), it ships the repository's key
  and a source that names it.
- nvidia-driver-pinning-BRANCH: NVIDIA's documented pin, holding every driver package to BRANCH.
- nvidia-driver depends, version for version, on nvidia-kernel-open-dkms, libglx-nvidia0,
  libegl-nvidia0, xserver-xorg-video-nvidia, nvidia-smi, nvidia-modprobe: a pin that misses any
  of them leaves apt with unmet dependencies once the newer branch is there.
- nvidia-kernel-open-dkms: its configure step "builds" for 20 s of CPU (DKMS compiles at configure time); the
  "module" loads at the next boot (a unit marks it loaded, as the DKMS-built module would be), and at install
  time only when the running kernel's headers are installed (running_kernel_headers): then `modprobe nvidia`
  loads it and the guest takes its path without a reboot; otherwise modprobe finds nothing, and the guest reboots.
- nvidia-persistenced: the unit as NVIDIA's Debian package ships it (static, --no-persistence-mode) and a
  daemon that sets persistence mode as its flags say (nvidia-smi reports it).
- xserver-xorg-video-nvidia: its unpack takes 10 s (marked on the boot disk), so the boot test can stop the VM
  in the middle of apt's unpack.
- nvidia-smi answers as a Tesla T4 once the module is loaded; nvidia-modprobe -u creates
  /dev/nvidia-uvm, and like the setuid original it fails unless it runs with root's privileges.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

BRANCHES = {"615": "615.71.09-1", "620": "620.20.01-1"}
DRIVER_PACKAGES = ["nvidia-kernel-open-dkms", "libglx-nvidia0", "libegl-nvidia0", "xserver-xorg-video-nvidia",
                   "nvidia-smi", "nvidia-modprobe"]
STATE = "/run/nvidia-standin"
# The package's files as NVIDIA's cuda-keyring ships them ([gce-t4-article]'s source list).
KEYRING_LIST = "/etc/apt/sources.list.d/cuda-debian13-x86_64.list"
KEYRING_KEY = "/usr/share/keyrings/cuda-archive-keyring.gpg"

NVIDIA_SMI = """#!/bin/sh
# Stand-in: a Tesla T4 once the module is loaded (at the boot after the install).
if [ ! -f {state}/loaded ]; then
  echo "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver." >&2
  exit 9
fi
version=$(cat {state}/loaded)
case "$*" in
  *--query-gpu=*)
    fields=$(echo "$*" | sed 's/.*--query-gpu=\\([^ ]*\\).*/\\1/')
    out=""
    for f in $(echo "$fields" | tr , ' '); do
      case $f in
        name) v="Tesla T4" ;; compute_cap) v="7.5" ;; memory.total) v="15360 MiB" ;;
        memory.used) v="0 MiB" ;; driver_version) v="$version" ;; utilization.gpu) v="0 %" ;;
        persistence_mode) v=$(cat {state}/persistence_mode 2>/dev/null || echo Disabled) ;; *) v="[N/A]" ;;
      esac
      out="${{out:+$out, }}$v"
    done
    echo "$out" ;;
  *) echo "NVIDIA-SMI $version   Driver Version: $version   GPU 0: Tesla T4" ;;
esac
"""

NVIDIA_MODPROBE = """#!/bin/sh
# Stand-in for the setuid nvidia-modprobe: only root's privileges may load nvidia-uvm.
if [ "$(id -u)" -ne 0 ]; then
  echo "nvidia-modprobe: permission denied (needs root; setuid is void under NoNewPrivileges)" >&2
  exit 1
fi
mkdir -p {state}
: > /dev/nvidia-uvm
echo "uvm loaded by uid $(id -u)" >> {state}/uvm.log
"""

# source: the unit NVIDIA's Debian packaging of nvidia-persistenced installs, as `systemctl cat` shows it on a
# VM (/usr/lib/systemd/system/nvidia-persistenced.service, "static": no [Install] section, so `systemctl
# enable` does nothing; StopWhenUnneeded=, so it runs only while something wants it; and
# --no-persistence-mode, which forces persistence mode off: nvidia-persistenced(1), "By default,
# nvidia-persistenced starts with persistence mode enabled for all devices. Use '--no-persistence-mode' to force
# persistence mode off"). The upstream sample (NVIDIA/nvidia-persistenced, init/systemd/
# nvidia-persistenced.service.template) has neither the flag nor StopWhenUnneeded=.
PERSISTENCED_UNIT = """[Unit]
Description=NVIDIA Persistence Daemon
Wants=syslog.target
StopWhenUnneeded=true
Before=systemd-backlight@backlight:nvidia_0.service

[Service]
Type=forking
ExecStart=/usr/bin/nvidia-persistenced --user nvidia-persistenced --no-persistence-mode --verbose
ExecStopPost=/bin/rm -rf /var/run/nvidia-persistenced
"""

# The daemon stood in: it forks and stays (Type=forking), and sets persistence mode as its flags say, which
# nvidia-smi --query-gpu=persistence_mode then reports ("Enabled"/"Disabled"); on exit it is off again. It does
# not change user (the real one drops to --user's).
NVIDIA_PERSISTENCED = """#!/bin/sh
mode=Enabled
for arg in "$@"; do
  [ "$arg" = --no-persistence-mode ] && mode=Disabled
done
mkdir -p {state} /var/run/nvidia-persistenced
echo "$mode" > {state}/persistence_mode
( trap 'echo Disabled > {state}/persistence_mode; exit 0' TERM
  while :; do sleep 1; done ) >/dev/null 2>&1 &
echo $! > /var/run/nvidia-persistenced/nvidia-persistenced.pid
echo "nvidia-persistenced stand-in: started, persistence mode $mode"
"""

# source: Debian's DKMS packaging (dh_dkms: the package's postinst runs `dkms install` for the module, which
# compiles it at configure time, minutes on 2 vCPUs, for every kernel whose headers are installed). The stand-in's
# build works the CPU for 20 s (or the seconds in BUILD_SECONDS_FILE, a test's own), as a compiler does, and marks
# itself on the boot disk, so the boot test can stop the VM in the middle of it, as a preemption would. When the
# running kernel's headers are there (/lib/modules/RELEASE/build, as linux-headers-RELEASE links it), DKMS builds
# the module for that kernel and `modprobe nvidia` loads it at once: the stand-in says so with modprobe.d(5)'s
# `install` line, which runs a command in place of inserting the module (here: marks it loaded). Without those
# headers (the fallback installs another kernel's), the module loads only at the boot into that kernel.
DKMS_BUILDING = "/var/lib/nvidia-standin/dkms-building"
BUILD_SECONDS_FILE = "/opt/gemma4-t4-test/dkms-build-seconds"
DKMS_POSTINST = f"""#!/bin/sh
set -e
if [ "$1" = configure ]; then
  mkdir -p "$(dirname {DKMS_BUILDING})"
  touch {DKMS_BUILDING}
  seconds=$(cat {BUILD_SECONDS_FILE} 2>/dev/null || echo 20)
  echo "nvidia-kernel-open-dkms stand-in: building the module (DKMS, $seconds s of CPU)"
  end=$(( $(date +%s) + seconds ))
  while [ "$(date +%s)" -lt "$end" ]; do i=0; while [ $i -lt 20000 ]; do i=$((i + 1)); done; done
  if [ -e "/lib/modules/$(uname -r)/build" ]; then
    mkdir -p /etc/modprobe.d
    echo "install nvidia /bin/sh -c 'mkdir -p {STATE} && echo __VERSION__ > {STATE}/loaded'" \\
      > /etc/modprobe.d/nvidia-standin.conf
    echo "nvidia-kernel-open-dkms stand-in: built for the running kernel $(uname -r): modprobe loads it now"
  fi
  rm -f {DKMS_BUILDING}
fi
"""

# source: dpkg's unpack (src/main/unpack.c, process_archive): before a new package's preinst runs and its files
# are extracted, dpkg records the package as half-installed and reinstall-required; a stop anywhere in that
# stretch leaves it so, and only a reinstall from the archive repairs it. The stand-in's preinst waits 10 s there
# (the real driver's files take a while to unpack), marked on the boot disk, so the boot test can stop the VM in
# the middle of apt's unpack. apt unpacks this package after nvidia-kernel-open-dkms and before nvidia-driver,
# which depends on it: stopped here, the next `dpkg --configure -a` cannot configure nvidia-driver.
UNPACKING = "/var/lib/nvidia-standin/unpacking"
SLOW_UNPACK = "xserver-xorg-video-nvidia"
UNPACK_PREINST = f"""#!/bin/sh
set -e
if [ "$1" = install ]; then
  mkdir -p "$(dirname {UNPACKING})"
  touch {UNPACKING}
  echo "{SLOW_UNPACK} stand-in: unpacking"
  sleep 10
  rm -f {UNPACKING}
fi
"""

MODULE_UNIT = """[Unit]
Description=NVIDIA module stand-in: loaded at boot, as the DKMS-built module is
DefaultDependencies=no
Before=sysinit.target

[Service]
Type=oneshot
ExecStart=/bin/sh -c 'mkdir -p {state} && echo {version} > {state}/loaded'

[Install]
WantedBy=sysinit.target
"""


def _deb(out: Path, name: str, version: str, depends: str = "", files: dict[str, tuple[str, int]] | None = None,
         links: dict[str, str] | None = None, postinst: str | None = None, preinst: str | None = None,
         binaries: dict[str, Path] | None = None) -> Path:
    root = out / "build" / f"{name}_{version}"
    (root / "DEBIAN").mkdir(parents=True, exist_ok=True)
    control = [f"Package: {name}", f"Version: {version}", "Architecture: all" if name == "cuda-keyring"
               else "Architecture: amd64", "Maintainer: gemma4-t4 boot test <test@invalid>",
               f"Description: stand-in for NVIDIA's {name}"]
    if depends:
        control.insert(3, f"Depends: {depends}")
    (root / "DEBIAN" / "control").write_text("\n".join(control) + "\n")
    for script, text in (("preinst", preinst), ("postinst", postinst)):
        if text:
            (root / "DEBIAN" / script).write_text(text)
            (root / "DEBIAN" / script).chmod(0o755)
    for path, (text, mode) in (files or {}).items():
        target = root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        target.chmod(mode)
    for path, source in (binaries or {}).items():
        target = root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
        target.chmod(0o644)
    for path, dest in (links or {}).items():
        target = root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.symlink_to(dest)
    arch = "all" if name == "cuda-keyring" else "amd64"
    deb = out / f"{name}_{version}_{arch}.deb"
    subprocess.run(["dpkg-deb", "--root-owner-group", "-Zgzip", "--build", str(root), str(deb)], check=True,
                   capture_output=True)
    return deb


class SigningKey:
    """A key made for the test in a GnuPG home of its own (a short path: gpg-agent's socket lives there)."""

    def __init__(self) -> None:
        self.home = tempfile.mkdtemp(prefix="g4t4-gpg-")
        self.gpg("--quick-gen-key", "gemma4-t4 boot test (NVIDIA stand-in) <test@invalid>", "ed25519", "sign", "never")
        listed = self.gpg("--with-colons", "--list-keys").stdout
        self.fingerprint = next(line.split(":")[9] for line in listed.splitlines() if line.startswith("fpr:"))

    def gpg(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["gpg", "--batch", "--pinentry-mode", "loopback", "--passphrase", "", *args],
                              env={**os.environ, "GNUPGHOME": self.home}, check=True, capture_output=True, text=True)

    def sign(self, release: Path) -> None:
        """InRelease (clear-signed) and Release.gpg (detached), as a signed flat repository carries them."""
        self.gpg("--yes", "--clearsign", "--output", str(release.with_name("InRelease")), str(release))
        self.gpg("--yes", "--armor", "--detach-sign", "--output", str(release.with_name("Release.gpg")), str(release))

    def close(self) -> None:
        subprocess.run(["gpgconf", "--kill", "all"], env={**os.environ, "GNUPGHOME": self.home}, capture_output=True)
        shutil.rmtree(self.home, ignore_errors=True)


def build(out: Path, repo_url: str, key_file: str) -> str:
    """The repository's files under OUT, as served at REPO_URL (NVIDIA's flat layout: `deb URL /`), signed by a key
    made for it, published as KEY_FILE beside the index. Returns that key's fingerprint."""
    out.mkdir(parents=True, exist_ok=True)
    key = SigningKey()
    try:
        (out / key_file).write_text(key.gpg("--armor", "--export").stdout)
        binary = subprocess.run(["gpg", "--batch", "--export"], env={**os.environ, "GNUPGHOME": key.home},
                                check=True, capture_output=True).stdout
        keyring_dir = out / "build" / "keyring"
        keyring_dir.mkdir(parents=True, exist_ok=True)
        (keyring_dir / "cuda-archive-keyring.gpg").write_bytes(binary)
        debs = [_deb(out, "cuda-keyring", "1.1-1", files={
            KEYRING_LIST: (f"deb [signed-by={KEYRING_KEY}] {repo_url}/ /\n", 0o644)},
            binaries={KEYRING_KEY: keyring_dir / "cuda-archive-keyring.gpg"})]
        debs += _driver_debs(out)
        # the keyring is fetched by URL, not through apt
        flat_repo(out, [deb for deb in debs if not deb.name.startswith("cuda-keyring")],
                  "gemma4-t4 boot test (NVIDIA stand-in)", "cuda", sign=key.sign)
        return key.fingerprint
    finally:
        key.close()


def keyring_bytes(out: Path) -> bytes:
    """The key the cuda-keyring stand-in ships (the repository's, dearmored), of the repository built in OUT."""
    return (out / "build" / "keyring" / "cuda-archive-keyring.gpg").read_bytes()


def _driver_debs(out: Path) -> list[Path]:
    debs = []
    for branch, version in BRANCHES.items():
        pin = f"Package: *nvidia* libcuda* libnv* firmware-nvidia*\nPin: version {branch}.*\nPin-Priority: 1000\n"
        debs.append(_deb(out, f"nvidia-driver-pinning-{branch}", version,
                         files={f"/etc/apt/preferences.d/nvidia-driver-pinning-{branch}": (pin, 0o644)}))
        debs.append(_deb(out, "nvidia-driver", version, ", ".join(f"{p} (= {version})" for p in DRIVER_PACKAGES)))
        unit = "/usr/lib/systemd/system/nvidia-standin-module.service"
        debs.append(_deb(out, "nvidia-kernel-open-dkms", version,
                         files={unit: (MODULE_UNIT.format(state=STATE, version=version.split("-")[0]), 0o644)},
                         links={"/etc/systemd/system/sysinit.target.wants/nvidia-standin-module.service": unit},
                         postinst=DKMS_POSTINST.replace("__VERSION__", version.split("-")[0])))
        debs.append(_deb(out, "nvidia-smi", version,
                         files={"/usr/bin/nvidia-smi": (NVIDIA_SMI.format(state=STATE), 0o755)}))
        debs.append(_deb(out, "nvidia-modprobe", version,
                         files={"/usr/bin/nvidia-modprobe": (NVIDIA_MODPROBE.format(state=STATE), 0o755)}))
        debs.append(_deb(out, "nvidia-persistenced", version,
                         files={"/usr/lib/systemd/system/nvidia-persistenced.service": (PERSISTENCED_UNIT, 0o644),
                                "/usr/bin/nvidia-persistenced": (NVIDIA_PERSISTENCED.format(state=STATE), 0o755)}))
        for name in ("libglx-nvidia0", "libegl-nvidia0", "xserver-xorg-video-nvidia"):
            debs.append(_deb(out, name, version, preinst=UNPACK_PREINST if name == SLOW_UNPACK else None))
    return debs


def running_kernel_headers(out: Path, release: str) -> None:
    """A flat apt repository under OUT with linux-headers-RELEASE: the running kernel's headers, still in the
    archive (the seed's image: its kernel's headers are in backports), which DKMS builds the module against.
    source: Debian's linux-headers-RELEASE packages ship /usr/src/linux-headers-RELEASE and the link
    /lib/modules/RELEASE/build to it (the kernel's Kbuild tree DKMS builds in)."""
    out.mkdir(parents=True, exist_ok=True)
    deb = _deb(out, f"linux-headers-{release}", "1.0-1",
               files={f"/usr/src/linux-headers-{release}/Makefile": ("# the kernel's Kbuild tree (stand-in)\n", 0o644)},
               links={f"/lib/modules/{release}/build": f"/usr/src/linux-headers-{release}"})
    flat_repo(out, [deb], "gemma4-t4 boot test (the running kernel's headers)", "headers")


def flat_repo(out: Path, debs: list[Path], origin: str, label: str,
              sign: Callable[[Path], None] | None = None) -> None:
    """Packages, Packages.gz and Release for DEBS in OUT, as a flat repository (`deb URL /`) carries them; SIGN, when
    given, signs the Release."""
    stanzas = []
    for deb in debs:
        control = subprocess.run(["dpkg-deb", "-f", str(deb)], check=True, capture_output=True, text=True).stdout
        data = deb.read_bytes()
        stanzas.append(control.strip() + f"\nFilename: ./{deb.name}\nSize: {len(data)}\n"
                       f"SHA256: {hashlib.sha256(data).hexdigest()}\n")
    packages = "\n".join(stanzas).encode()
    (out / "Packages").write_bytes(packages)
    (out / "Packages.gz").write_bytes(gzip.compress(packages, mtime=0))
    lines = [f"Origin: {origin}", f"Label: {label}", "Architectures: amd64 all",
             "Date: Tue, 01 Dec 2026 00:00:00 UTC", "SHA256:"]
    for name in ("Packages", "Packages.gz"):
        data = (out / name).read_bytes()
        lines.append(f" {hashlib.sha256(data).hexdigest()} {len(data)} {name}")
    (out / "Release").write_text("\n".join(lines) + "\n")
    if sign is not None:
        sign(out / "Release")
