#!/bin/bash
# NVIDIA's driver, held to one branch (open DKMS module), from NVIDIA's CUDA apt repository for
# Debian 13. Exit 0: driver loaded. Exit 0 with REBOOT_FLAG written: installed, a reboot loads it.
# Safe to run on every boot; it touches nothing (and needs no network) once nvidia-smi answers.
set -euo pipefail

: "${DRIVER_BRANCH:?}" "${CUDA_KEYRING_VERSION:?}" "${CUDA_REPO_URL:?}" "${REBOOT_FLAG:?}"
log() { echo "install-driver: $*"; }
export DEBIAN_FRONTEND=noninteractive

if nvidia-smi >/dev/null 2>&1; then
  log "driver loaded: $(nvidia-smi --query-gpu=name,compute_cap,memory.total,driver_version --format=csv,noheader)"
  exit 0
fi

apt-get update
# DKMS builds the module against a kernel's headers. The image's own kernel's headers leave the
# archive once a newer kernel supersedes it (GoogleCloudPlatform/compute-gpu-installation#28):
# then install the newest cloud kernel with its headers, which DKMS builds for, and reboot into it.
running=$(uname -r)
if [ -n "$(apt-cache show --no-all-versions "linux-headers-$running" 2>/dev/null)" ]; then
  headers=("linux-headers-$running")
  # With the headers metapackage at the kernel metapackage's version, a kernel that an upgrade
  # installs later comes with its headers, and DKMS builds the module for it before the reboot
  # into it (otherwise that boot has no driver until apt can run again).
  meta=$(dpkg-query -W -f='${Version}' linux-image-cloud-amd64 2>/dev/null || true)
  if [ -n "$meta" ] && [ -n "$(apt-cache show "linux-headers-cloud-amd64=$meta" 2>/dev/null)" ]; then
    headers+=("linux-headers-cloud-amd64=$meta")
  fi
  apt-get install -y "${headers[@]}"
else
  log "no linux-headers-$running in the archive (the image's kernel was superseded): installing the" \
    "current cloud kernel and its headers; a reboot starts it"
  apt-get install -y linux-image-cloud-amd64 linux-headers-cloud-amd64
  mkdir -p "$(dirname "$REBOOT_FLAG")"
  touch "$REBOOT_FLAG"
fi

if [ "$(dpkg-query -W -f='${Version}' cuda-keyring 2>/dev/null || true)" != "$CUDA_KEYRING_VERSION" ]; then
  keyring_deb=$(mktemp --suffix=.deb)
  curl -fsSL --retry 3 -o "$keyring_deb" "$CUDA_REPO_URL/cuda-keyring_${CUDA_KEYRING_VERSION}_all.deb"
  dpkg -i "$keyring_deb"
  rm -f "$keyring_deb"
  apt-get update
fi

# NVIDIA's own pin for Debian, installed before the driver: it holds every package of the driver
# (libglx-nvidia0, xserver-xorg-video-nvidia, ... not only nvidia-*) to the branch, so a newer
# branch in the repository cannot half-upgrade the driver into unmet dependencies.
apt-get install -y "nvidia-driver-pinning-$DRIVER_BRANCH"
# nvidia-persistenced keeps the driver initialised with no client (NVIDIA's driver persistence
# guide: on a headless machine the driver otherwise tears the GPU down between clients, and each
# nvidia-smi or vLLM start pays the initialisation again).
apt-get install -y nvidia-driver nvidia-kernel-open-dkms nvidia-modprobe nvidia-persistenced
systemctl enable nvidia-persistenced.service

installed=$(dpkg-query -W -f='${Version}' nvidia-driver)
case $installed in
  "$DRIVER_BRANCH".*) log "nvidia-driver $installed installed (branch $DRIVER_BRANCH)" ;;
  *) echo "install-driver: nvidia-driver $installed is not branch $DRIVER_BRANCH" >&2; exit 1 ;;
esac

if [ ! -f "$REBOOT_FLAG" ] && modprobe nvidia 2>/dev/null && nvidia-smi >/dev/null 2>&1; then
  log "driver loaded without a reboot"
else
  mkdir -p "$(dirname "$REBOOT_FLAG")"
  touch "$REBOOT_FLAG"
  log "driver installed; a reboot loads it"
fi
