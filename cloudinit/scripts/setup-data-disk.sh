#!/bin/bash
# Make the data disk usable at MOUNTPOINT, mounted by UUID from fstab.
# It formats the disk only when it holds no filesystem signature at all: a disk with data
# (ours from an earlier VM, or anything else) is never reformatted. Safe to run on every boot.
set -euo pipefail

device=${1:?usage: setup-data-disk.sh DEVICE MOUNTPOINT}
mountpoint=${2:?usage: setup-data-disk.sh DEVICE MOUNTPOINT}
fstab=${FSTAB:-/etc/fstab}
log() { echo "setup-data-disk: $*"; }
die() { echo "setup-data-disk: $*" >&2; exit 1; }
# refuse: what no retry changes (a disk or an fstab line that is someone else's); provision.sh's exit 3.
refuse() { echo "setup-data-disk: $*" >&2; exit 3; }

# A freshly attached persistent disk can appear a few seconds after boot.
for _ in $(seq 60); do
  [ -e "$device" ] && break
  sleep 1
done
[ -e "$device" ] || die "no device at $device (is the data disk attached?)"

fstype=$(blkid -o value -s TYPE "$device" || true)
if [ -z "$fstype" ]; then
  # blkid finds nothing on a blank disk, but also on a signature it does not know:
  # wipefs lists every signature it can see. Anything at all means hands off.
  if [ -n "$(wipefs --no-act --noheadings --output TYPE "$device" 2>/dev/null)" ]; then
    refuse "$device carries an unrecognised signature; refusing to format it"
  fi
  log "$device is blank: creating ext4"
  mkfs.ext4 -q -m 0 -L gemma4-data "$device"
  fstype=ext4
elif [ "$fstype" != ext4 ]; then
  refuse "$device holds a $fstype filesystem, not ext4; refusing to touch it"
else
  log "$device already holds ext4: keeping its data"
fi

uuid=$(blkid -o value -s UUID "$device")
[ -n "$uuid" ] || die "no UUID on $device"
# fstab_has FIELD VALUE: a non-comment fstab line whose field FIELD is exactly VALUE.
fstab_has() { [ -f "$fstab" ] && awk -v n="$1" -v v="$2" '$1 !~ /^#/ && $n == v {f = 1} END {exit !f}' "$fstab"; }
if fstab_has 1 "UUID=$uuid"; then
  log "fstab already mounts UUID=$uuid"
elif fstab_has 2 "$mountpoint"; then
  refuse "$fstab already mounts something else at $mountpoint; fix that line by hand"
else
  echo "UUID=$uuid $mountpoint ext4 discard,defaults,nofail 0 2" >>"$fstab"
  log "added UUID=$uuid $mountpoint to $fstab"
fi

mkdir -p "$mountpoint"
if mountpoint -q "$mountpoint"; then
  log "$mountpoint already mounted"
else
  mount --fstab "$fstab" "$mountpoint"
  log "mounted $mountpoint"
fi
