#!/bin/bash
# A swapfile that survives reboot: created once, listed in fstab, switched on now.
# vLLM is killed by the kernel while staging weights on a 7.8 GB host without swap.
# SIZE_GB 0 means no swap (an existing swapfile goes). ACTIVATE=0 skips swapon and swapoff (for a machine
# that cannot swap). A new size on a running VM (guest_bundle.py) makes the new swapfile and switches it on
# before the old one goes off: vLLM's pages never have to fit in RAM alone.
set -euo pipefail

swapfile=${1:?usage: setup-swap.sh SWAPFILE SIZE_GB}
size_gb=${2:?usage: setup-swap.sh SWAPFILE SIZE_GB}
fstab=${FSTAB:-/etc/fstab}
activate=${ACTIVATE:-1}
log() { echo "setup-swap: $*"; }

is_active() { swapon --show=NAME --noheadings 2>/dev/null | grep -qxF "$1"; }
swap_off() { if [ "$activate" = 1 ] && is_active "$1"; then swapoff "$1"; fi; }
in_fstab() { [ -f "$fstab" ] && awk -v f="$swapfile" '$1 == f {found = 1} END {exit !found}' "$fstab"; }

if [ "$size_gb" -eq 0 ]; then
  if [ -f "$swapfile" ]; then
    swap_off "$swapfile"
    rm -f "$swapfile"
    log "swap size 0: removed $swapfile"
  else
    log "swap size 0: no swapfile"
  fi
  if in_fstab; then
    awk -v f="$swapfile" '$1 != f' "$fstab" >"$fstab.new" && mv -f "$fstab.new" "$fstab"
    log "removed $swapfile from $fstab"
  fi
  exit 0
fi

want_bytes=$((size_gb * 1024 * 1024 * 1024))
if [ -f "$swapfile" ] && [ "$(stat -c %s "$swapfile")" -eq "$want_bytes" ] &&
  [ "$(blkid -o value -s TYPE "$swapfile" || true)" = swap ]; then
  log "$swapfile exists (${size_gb}G)"
else
  # The new one beside the old (a half-made one from a stop is made again), on before the old goes off.
  rm -f "$swapfile.new"
  fallocate -l "${size_gb}G" "$swapfile.new"
  chmod 600 "$swapfile.new"
  mkswap "$swapfile.new" >/dev/null
  if [ "$activate" = 1 ] && is_active "$swapfile"; then
    swapon "$swapfile.new"
    swapoff "$swapfile"
  fi
  mv -f "$swapfile.new" "$swapfile" # an active swapfile keeps working under its new name
  log "created $swapfile (${size_gb}G)"
fi
chmod 600 "$swapfile"

if in_fstab; then
  log "fstab already lists $swapfile"
else
  echo "$swapfile none swap sw,nofail 0 0" >>"$fstab"
  log "added $swapfile to $fstab"
fi

if [ "$activate" = 1 ] && ! is_active "$swapfile"; then
  swapon "$swapfile"
  log "swap on: $swapfile"
fi
