#!/bin/bash
# Brings the VM to "ready to serve" on every boot: each step checks before it acts, so a
# second run, a reboot or a replaced VM with the old data disk all end in the same state.
set -euo pipefail

set -a
# shellcheck source=/dev/null
. /etc/gemma4-t4/guest.env
set +a
lib=/usr/local/lib/gemma4-t4
log() { echo "provision: $*"; }
export DEBIAN_FRONTEND=noninteractive

if ! id "$SERVICE_USER" >/dev/null 2>&1; then
  useradd --system --home-dir "$DATA_MOUNT/home" --no-create-home --shell /usr/sbin/nologin "$SERVICE_USER"
fi

missing=()
for pkg in curl ca-certificates python3-venv "$PYTHON-venv"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'ok installed' || missing+=("$pkg")
done
if [ "${#missing[@]}" -gt 0 ]; then
  apt-get update
  apt-get install -y "${missing[@]}"
fi

"$lib/setup-data-disk.sh" "$DATA_DEVICE" "$DATA_MOUNT"
"$lib/setup-swap.sh" "$DATA_MOUNT/swapfile" "$SWAP_SIZE_GB"

# Caches and the service's home live on the data disk, owned by the service user.
install -d -o "$SERVICE_USER" -g "$SERVICE_USER" "$DATA_MOUNT/home" "$DATA_MOUNT/cache" "$DATA_MOUNT/cache/tmp"

rm -f "$REBOOT_FLAG"
"$lib/install-driver.sh"
"$lib/install-vllm.sh"

if [ -f "$REBOOT_FLAG" ]; then
  # Bounded: a driver that never loads must not reboot the VM forever.
  count_file=/var/lib/gemma4-t4/driver-reboots
  mkdir -p "$(dirname "$count_file")"
  count=$(cat "$count_file" 2>/dev/null || echo 0)
  if [ "$count" -ge 2 ]; then
    log "the driver did not load after $count reboots; see 'journalctl -k' and 'dkms status'"
    exit 1
  fi
  echo $((count + 1)) >"$count_file"
  log "rebooting to load the NVIDIA driver"
  systemctl reboot
  exit 0
fi
rm -f /var/lib/gemma4-t4/driver-reboots
log "ready: $(nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader)"
