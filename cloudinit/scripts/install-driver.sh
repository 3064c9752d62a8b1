#!/bin/bash
# NVIDIA's 615 driver branch (open DKMS module) from NVIDIA's CUDA apt repository for Debian 13.
# Exit 0: driver loaded. Exit 0 with REBOOT_FLAG written: installed, a reboot loads it.
# Safe to run on every boot; it does nothing once nvidia-smi answers.
set -euo pipefail

: "${DRIVER_BRANCH:?}" "${CUDA_KEYRING_VERSION:?}" "${CUDA_REPO_URL:?}" "${REBOOT_FLAG:?}"
log() { echo "install-driver: $*"; }
export DEBIAN_FRONTEND=noninteractive

if nvidia-smi >/dev/null 2>&1; then
  log "driver loaded: $(nvidia-smi --query-gpu=name,compute_cap,memory.total,driver_version --format=csv,noheader)"
  exit 0
fi

# DKMS builds the module against the running kernel, so its headers come first
# (on the cloud kernel they come from backports, which the GCE image already lists).
apt-get update
apt-get install -y "linux-headers-$(uname -r)"

if [ "$(dpkg-query -W -f='${Version}' cuda-keyring 2>/dev/null || true)" != "$CUDA_KEYRING_VERSION" ]; then
  keyring_deb=$(mktemp --suffix=.deb)
  curl -fsSL --retry 5 -o "$keyring_deb" "$CUDA_REPO_URL/cuda-keyring_${CUDA_KEYRING_VERSION}_all.deb"
  dpkg -i "$keyring_deb"
  rm -f "$keyring_deb"
fi

# Hold every NVIDIA driver package to the pinned branch, whatever newer branch the repo offers.
cat >/etc/apt/preferences.d/gemma4-t4-nvidia-driver <<PIN
Package: nvidia-* libnvidia-* libcuda1 firmware-nvidia-*
Pin: version ${DRIVER_BRANCH}.*
Pin-Priority: 1001
PIN

apt-get update
apt-get install -y nvidia-driver nvidia-kernel-open-dkms

if modprobe nvidia 2>/dev/null && nvidia-smi >/dev/null 2>&1; then
  log "driver loaded without a reboot"
else
  mkdir -p "$(dirname "$REBOOT_FLAG")"
  touch "$REBOOT_FLAG"
  log "driver installed; a reboot loads it"
fi
