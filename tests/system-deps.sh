#!/bin/bash
# The system tools the tests call that PyPI does not package (shellcheck and hadolint come from
# PyPI into .venv). Each missing one is installed with apt-get when running as root on Debian;
# otherwise this stops at once with the exact command to run.
#   tests/system-deps.sh               the tests' tools
#   tests/system-deps.sh venv PYTHON   what `PYTHON -m venv` needs: Debian ships ensurepip apart, in
#                                      pythonX.Y-venv, which a fresh Debian 13 lacks (`make plan` needs it)
set -euo pipefail

# command -> the Debian package that provides it
declare -A PACKAGE_OF=(
  [cloud-init]=cloud-init          # `cloud-init schema` on the rendered user-data
  [systemd-analyze]=systemd        # `systemd-analyze verify` on the guest's units
  [mkfs.ext4]=e2fsprogs            # the data-disk script's own tools, run on a loop device
  [losetup]=mount
  [wipefs]=util-linux
  [mkswap]=util-linux
  [buildah]=buildah                # the SageMaker Dockerfile, built for real on a stand-in base
  [mmdebstrap]=mmdebstrap          # that base's Debian root filesystem (tests/fixtures/debian-rootfs.sh)
  # The registry the local image builder pushes to on loopback (tests/components/sagemaker/test_sagemaker_local_build.py):
  # Debian's build of the CNCF distribution registry, the server Docker Hub and ECR's API copy.
  [docker-registry]=docker-registry
  # The local builder's other two tools, run for real on a tiny image and on their command lines
  # (test_sagemaker_local_build.py). docker: Debian 13's client alone (docker-cli, split from docker.io), so no
  # daemon is installed and started, and none changes the machine's iptables under the boot test's networks.
  [podman]=podman
  [docker]=docker-cli
  # The boot test (tests/guest/test_guest_boot.py): a Debian 13 root filesystem booted under systemd.
  [systemd-nspawn]=systemd-container
  [nsenter]=util-linux
  [ip]=iproute2
  [openssl]=openssl
  [dpkg-deb]=dpkg
  # The NVIDIA stand-in signs its index with a key made for the test (tests/guest/fake_nvidia.py).
  [gpg]=gnupg
)

# Adds to `missing` the Debian package of each of the tests' tools that is not installed.
tools_missing() {
  for tool in "${!PACKAGE_OF[@]}"; do
    command -v "$tool" >/dev/null 2>&1 || PATH=$PATH:/usr/sbin:/sbin command -v "$tool" >/dev/null 2>&1 ||
      missing+=("${PACKAGE_OF[$tool]}")
  done
  # Debian 13's buildah (1.39) sets up a container's network only through netavark, which apt takes
  # as a mere Recommends ('could not find "netavark"' otherwise); Debian 12's (1.28) uses CNI.
  version_id=$(sed -n 's/^VERSION_ID="\{0,1\}\([0-9]*\).*/\1/p' /etc/os-release 2>/dev/null)
  if [ "${version_id:-0}" -ge 13 ] && [ ! -x /usr/lib/podman/netavark ]; then
    missing+=(netavark)
  fi
}

# The Debian package that gives PYTHON its venv module, if missing (Debian ships ensurepip apart).
venv_missing() {
  "$1" -c 'import ensurepip, venv' 2>/dev/null ||
    "$1" -c 'import sys; print("python%d.%d-venv" % sys.version_info[:2])'
}

if [ "${1:-}" = venv ]; then
  mapfile -t missing < <(venv_missing "${2:-python3}")
else
  missing=()
  tools_missing
fi
[ "${#missing[@]}" -eq 0 ] && exit 0
mapfile -t packages < <(printf '%s\n' "${missing[@]}" | sort -u)

if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "system-deps: make needs: ${packages[*]}" >&2
  echo "system-deps: install them, then run make again:  sudo apt-get install -y ${packages[*]}" >&2
  exit 1
fi
echo "system-deps: installing ${packages[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get -o DPkg::Lock::Timeout=600 update -qq
apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${packages[@]}" >/dev/null
