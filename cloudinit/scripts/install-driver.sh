#!/bin/bash
# NVIDIA's driver, held to one branch (open DKMS module), from NVIDIA's CUDA apt repository for
# Debian 13. Exit 0: driver loaded. Exit 0 with REBOOT_FLAG written: installed, a reboot loads it.
# Safe to run on every boot; it touches nothing (and needs no network) once nvidia-smi answers.
set -euo pipefail

: "${DRIVER_BRANCH:?}" "${CUDA_REPO_URL:?}" "${CUDA_REPO_KEY:?}" "${CUDA_REPO_KEY_FINGERPRINT:?}" "${REBOOT_FLAG:?}"
log() { echo "install-driver: $*"; }
export DEBIAN_FRONTEND=noninteractive
lib=$(dirname "$(readlink -f "$0")")

# NVIDIA's CUDA repository, trusted through its signing key pinned by fingerprint (guest.env, from the catalog):
# the key is fetched from beside the repository and refused unless it is that one key (cuda_key.py), and only
# then written where the source's Signed-By names it, so apt trusts this repository to that key alone.
cuda_keyring=/etc/apt/keyrings/gemma4-t4-cuda.gpg
cuda_sources=/etc/apt/sources.list.d/gemma4-t4-cuda.sources
cuda_repo_changed=""
cuda_repo() {
  local key want
  # A VM of an earlier release trusts the repository through NVIDIA's cuda-keyring package, fetched unchecked. Its
  # source names the same repository with another Signed-By, which apt refuses outright ("Conflicting values set
  # for option Signed-By"): the package is purged (its list and its keyring go, conffiles or not), and its key is
  # kept only if it is the pinned one. Ours is removed first, so that apt can read its sources for the purge.
  if dpkg-query -W -f='${db:Status-Abbrev}' cuda-keyring 2>/dev/null | grep -q '^[a-z][^n]'; then
    if [ ! -s "$cuda_keyring" ] && [ -f /usr/share/keyrings/cuda-archive-keyring.gpg ]; then
      python3 "$lib/cuda_key.py" /usr/share/keyrings/cuda-archive-keyring.gpg "$CUDA_REPO_KEY_FINGERPRINT" \
        "$cuda_keyring" || true
    fi
    rm -f "$cuda_sources"
    apt-get purge -y cuda-keyring || return 1
    log "replaced the cuda-keyring package with the key pinned by fingerprint ($cuda_keyring)"
    cuda_repo_changed=1
  fi
  if ! { [ -s "$cuda_keyring" ] && python3 "$lib/cuda_key.py" "$cuda_keyring" "$CUDA_REPO_KEY_FINGERPRINT" >/dev/null; }; then
    key=$(mktemp)
    curl -fsSL -S --retry 3 -o "$key" "$CUDA_REPO_URL/$CUDA_REPO_KEY" || { rm -f "$key"; return 1; }
    python3 "$lib/cuda_key.py" "$key" "$CUDA_REPO_KEY_FINGERPRINT" "$cuda_keyring" || { rm -f "$key"; return 1; }
    rm -f "$key"
    cuda_repo_changed=1
  fi
  # deb822 (sources.list(5)): a flat repository is one exact path, "/", with no components.
  want=$(printf '%s\n' "# gemma4-t4: NVIDIA's CUDA repository, signed by the key pinned in guest.env" "Types: deb" \
    "URIs: $CUDA_REPO_URL/" "Suites: /" "Signed-By: $cuda_keyring")
  if [ "$(cat "$cuda_sources" 2>/dev/null)" != "$want" ]; then
    echo "$want" >"$cuda_sources"
    cuda_repo_changed=1
  fi
}

# Persistence mode on. NVIDIA's Debian package ships nvidia-persistenced.service static (no [Install], so
# `systemctl enable` does nothing), StopWhenUnneeded=yes, and starting the daemon with --no-persistence-mode,
# which forces persistence mode off (nvidia-persistenced(1); the daemon's default is on). A drop-in runs the
# package's own command without that flag, and multi-user.target wants the unit, so every boot starts it and
# keeps it. The daemon is NVIDIA's way to keep the driver initialised with no client (its driver persistence
# guide); `nvidia-smi -pm 1`, the legacy setting, would need a unit of its own to run at every boot.
persistence_on() {
  local unit="" dropin=/etc/systemd/system/nvidia-persistenced.service.d/gemma4-t4.conf command want path
  for path in /usr/lib/systemd/system/nvidia-persistenced.service /lib/systemd/system/nvidia-persistenced.service; do
    if [ -f "$path" ]; then unit=$path; break; fi
  done
  [ -n "$unit" ] || { log "nvidia-persistenced is not installed"; return 1; }
  command=$(sed -n 's/^ExecStart=//p' "$unit" | sed 's/ --no-persistence-mode\b//')
  want=$(printf '%s\n' "# gemma4-t4: the packaged command, with persistence mode on" "[Service]" "ExecStart=" \
    "ExecStart=$command")
  if [ "$(cat "$dropin" 2>/dev/null)" != "$want" ]; then
    mkdir -p "$(dirname "$dropin")"
    echo "$want" >"$dropin"
    systemctl daemon-reload
    log "nvidia-persistenced: persistence mode on ($dropin)"
  fi
  [ -e /etc/systemd/system/multi-user.target.wants/nvidia-persistenced.service ] ||
    systemctl add-wants multi-user.target nvidia-persistenced.service
  # With the driver loaded, (re)start it now; otherwise the boot that loads the driver starts it.
  if nvidia-smi >/dev/null 2>&1 && ! nvidia-smi --query-gpu=persistence_mode --format=csv,noheader | grep -q Enabled; then
    systemctl restart nvidia-persistenced.service
  fi
}

if nvidia-smi >/dev/null 2>&1; then
  # Offline once done: the key on disk is checked again, nothing is fetched while it is the pinned one.
  cuda_repo || log "warning: NVIDIA's repository is not set up with the pinned key (see above); the driver is loaded"
  persistence_on || log "warning: persistence mode is not on (see above); vLLM serves without it"
  log "driver loaded: $(nvidia-smi --query-gpu=name,compute_cap,memory.total,driver_version,persistence_mode \
    --format=csv,noheader)"
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
  # Without Recommends, as Debian's cloud images install their packages (debian-cloud-images' package_config:
  # "PACKAGES install-norec"): the kernel's Recommends (apparmor among them) are not what DKMS needs, and
  # apparmor's postinst ended dpkg mid-install in the boot test's container.
  apt-get install -y --no-install-recommends linux-image-cloud-amd64 linux-headers-cloud-amd64
  mkdir -p "$(dirname "$REBOOT_FLAG")"
  touch "$REBOOT_FLAG"
fi

cuda_repo
[ -z "$cuda_repo_changed" ] || apt-get update

# NVIDIA's own pin for Debian, installed before the driver: it holds every package of the driver
# (libglx-nvidia0, xserver-xorg-video-nvidia, ... not only nvidia-*) to the branch, so a newer
# branch in the repository cannot half-upgrade the driver into unmet dependencies.
apt-get install -y "nvidia-driver-pinning-$DRIVER_BRANCH"
# nvidia-persistenced keeps the driver initialised with no client (NVIDIA's driver persistence
# guide: on a headless machine the driver otherwise tears the GPU down between clients, and each
# nvidia-smi or vLLM start pays the initialisation again).
apt-get install -y nvidia-driver nvidia-kernel-open-dkms nvidia-modprobe nvidia-persistenced
persistence_on

installed=$(dpkg-query -W -f='${Version}' nvidia-driver)
case $installed in
  "$DRIVER_BRANCH".*) log "nvidia-driver $installed installed (branch $DRIVER_BRANCH)" ;;
  *) echo "install-driver: nvidia-driver $installed is not branch $DRIVER_BRANCH" >&2; exit 1 ;;
esac

if [ ! -f "$REBOOT_FLAG" ] && modprobe nvidia 2>/dev/null && nvidia-smi >/dev/null 2>&1; then
  log "driver loaded without a reboot"
  # persistence_on above ran before the module was loaded, when there was nothing to keep initialised.
  persistence_on || log "warning: persistence mode is not on (see above); vLLM serves without it"
else
  mkdir -p "$(dirname "$REBOOT_FLAG")"
  touch "$REBOOT_FLAG"
  log "driver installed; a reboot loads it"
fi
