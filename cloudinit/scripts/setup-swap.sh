#!/bin/bash
# A swapfile that survives reboot: created once, listed in fstab, switched on now.
# vLLM is killed by the kernel while staging weights on a 7.8 GB host without swap.
# SIZE_GB 0 means no swap. ACTIVATE=0 skips swapon (for a machine that cannot swap).
set -euo pipefail

swapfile=${1:?usage: setup-swap.sh SWAPFILE SIZE_GB}
size_gb=${2:?usage: setup-swap.sh SWAPFILE SIZE_GB}
fstab=${FSTAB:-/etc/fstab}
activate=${ACTIVATE:-1}
log() { echo "setup-swap: $*"; }

if [ "$size_gb" -eq 0 ]; then
  log "swap size 0: no swapfile"
  exit 0
fi

is_active() { swapon --show=NAME --noheadings 2>/dev/null | grep -qxF "$swapfile"; }
want_bytes=$((size_gb * 1024 * 1024 * 1024))

if [ -f "$swapfile" ] && [ "$(stat -c %s "$swapfile")" -eq "$want_bytes" ] &&
  [ "$(blkid -o value -s TYPE "$swapfile" || true)" = swap ]; then
  log "$swapfile exists (${size_gb}G)"
else
  if is_active; then swapoff "$swapfile"; fi
  rm -f "$swapfile"
  fallocate -l "${size_gb}G" "$swapfile"
  chmod 600 "$swapfile"
  mkswap "$swapfile" >/dev/null
  log "created $swapfile (${size_gb}G)"
fi
chmod 600 "$swapfile"

if [ -f "$fstab" ] && awk -v f="$swapfile" '$1 == f {found = 1} END {exit !found}' "$fstab"; then
  log "fstab already lists $swapfile"
else
  echo "$swapfile none swap sw,nofail 0 0" >>"$fstab"
  log "added $swapfile to $fstab"
fi

if [ "$activate" = 1 ] && ! is_active; then
  swapon "$swapfile"
  log "swap on: $swapfile"
fi
