#!/bin/bash
# A swapfile that survives reboot: created once, listed in fstab, switched on now.
# vLLM is killed by the kernel while staging weights on a 7.8 GB host without swap.
# SIZE_GB 0 means no swap (an existing swapfile goes). ACTIVATE=0 skips swapon and swapoff (for a machine
# that cannot swap). A new size on a running VM (guest_bundle.py): the kernel lets no one rename, remove or
# write an active swapfile (EPERM), so the new one is made in the other of two slots (SWAPFILE, SWAPFILE.2)
# and switched on before the old one goes off (vLLM's pages never have to fit in RAM alone), and fstab then
# names it.
set -euo pipefail

swapfile=${1:?usage: setup-swap.sh SWAPFILE SIZE_GB}
size_gb=${2:?usage: setup-swap.sh SWAPFILE SIZE_GB}
fstab=${FSTAB:-/etc/fstab}
activate=${ACTIVATE:-1}
log() { echo "setup-swap: $*"; }
slots=("$swapfile" "$swapfile.2")

is_active() { swapon --show=NAME --noheadings 2>/dev/null | grep -qxF "$1"; }
swap_off() { if [ "$activate" = 1 ] && is_active "$1"; then swapoff "$1"; fi; }
in_fstab() { [ -f "$fstab" ] && awk -v f="$1" '$1 == f {found = 1} END {exit !found}' "$fstab"; }
# only_in_fstab SLOT: fstab lists SLOT (none of them, with SLOT empty) and no other slot.
only_in_fstab() {
  local kept
  kept=$(awk -v a="${slots[0]}" -v b="${slots[1]}" '$1 != a && $1 != b' "$fstab" 2>/dev/null || true)
  { [ -n "$kept" ] && printf '%s\n' "$kept"; [ -z "$1" ] || echo "$1 none swap sw,nofail 0 0"; } >"$fstab.new"
  mv -f "$fstab.new" "$fstab"
}
# whole SLOT: SLOT is a swapfile of the wanted size.
whole() { [ -f "$1" ] && [ "$(stat -c %s "$1")" -eq "$want_bytes" ] && [ "$(blkid -o value -s TYPE "$1" || true)" = swap ]; }

if [ "$size_gb" -eq 0 ]; then
  for slot in "${slots[@]}"; do
    if [ -f "$slot" ]; then
      swap_off "$slot"
      rm -f "$slot"
      log "swap size 0: removed $slot"
    fi
  done
  if in_fstab "${slots[0]}" || in_fstab "${slots[1]}"; then
    only_in_fstab ""
    log "removed the swapfile from $fstab"
  fi
  exit 0
fi

want_bytes=$((size_gb * 1024 * 1024 * 1024))
# The slot in use: the one fstab names, else the first.
current=${slots[0]}
if in_fstab "${slots[1]}"; then current=${slots[1]}; fi
if whole "$current"; then
  target=$current
  log "$target exists (${size_gb}G)"
else
  # An active swapfile cannot be touched: the new size goes in the other slot. One that is not active (a wrong
  # size, no signature) is made again where it is.
  target=$current
  if is_active "$current"; then
    target=${slots[0]}
    [ "$current" != "${slots[0]}" ] || target=${slots[1]}
  fi
  if ! whole "$target"; then # a switch stopped after this file was made keeps it
    swap_off "$target"        # a switch stopped with both slots on: this one is not the size wanted either
    rm -f "$target"
    fallocate -l "${size_gb}G" "$target"
    chmod 600 "$target"
    mkswap "$target" >/dev/null
    log "created $target (${size_gb}G)"
  fi
fi
chmod 600 "$target"

if [ "$activate" = 1 ] && ! is_active "$target"; then
  swapon "$target"
  log "swap on: $target"
fi
for slot in "${slots[@]}"; do
  if [ "$slot" != "$target" ] && [ -e "$slot" ]; then
    swap_off "$slot"
    rm -f "$slot"
    log "removed the old $slot"
  fi
done
if in_fstab "$target" && ! in_fstab "$(if [ "$target" = "${slots[0]}" ]; then echo "${slots[1]}"; else echo "${slots[0]}"; fi)"; then
  log "fstab already lists $target"
else
  only_in_fstab "$target"
  log "added $target to $fstab"
fi
