#!/bin/bash
# GCE startup-script: Google's guest agent runs it on every boot. The official Debian images
# ship no cloud-init, so GCE's user-data would be ignored: on an instance's first boot this
# installs Debian's cloud-init and runs its network, config and final stages once; they read the
# same user-data from the metadata server, write the gemma4-t4 scripts and units and enable them.
# Not its local stage: on a booted VM it would bring up DHCP on the live NIC (GCE's datasource reads
# the metadata server over the network the image already configured). Those units run on every
# later boot; cloud-init's own boot units stay disabled, so its stages never run twice at once
# (boot-finished cannot tell "done": the marker below does).
set -uo pipefail
log() { echo "gemma4-t4 bootstrap: $*"; }
done_marker=/var/lib/gemma4-t4/cloud-init-done

if [ -f "$done_marker" ]; then
  log "cloud-init ran on this instance's first boot ($(cat "$done_marker")); the gemma4-t4 units run every boot"
  exit 0
fi

mkdir -p /etc/cloud/cloud.cfg.d
cat >/etc/cloud/cloud.cfg.d/90-gemma4-t4.cfg <<'CFG'
# Written by the gemma4-t4 bootstrap: user-data from GCE's metadata server only; no network
# config (the image configures its own NIC; cloud-init's fallback config would replace it); no
# users (GCE's guest agent manages logins; provision.sh creates the service user).
datasource_list: [GCE, None]
network: {config: disabled}
users: []
CFG
# Before the package is installed: its generator then never enables cloud-init's boot units.
touch /etc/cloud/cloud-init.disabled

# Nothing runs this script again before the next boot: what fails here is retried here, without a cap but
# with a growing pause, for GIVE_UP_S; a stop in the middle of an earlier boot's install (a preemption) left dpkg
# interrupted, which `dpkg --configure -a` then `apt-get -f install` finish before apt can install anything.
# The idle stop does not exist before cloud-init has run: a VM that could not set itself up within GIVE_UP_S
# powers itself off rather than bill (its disks stay; starting it again tries again).
GIVE_UP_S=3600
apt=(apt-get -o DPkg::Lock::Timeout=300)
recover_dpkg() {
  if [ -n "$(ls -A /var/lib/dpkg/updates 2>/dev/null)" ] || [ -n "$(dpkg --audit 2>/dev/null)" ]; then
    log "dpkg was interrupted: finishing its work"
    dpkg --configure -a || true
    DEBIAN_FRONTEND=noninteractive "${apt[@]}" -f install -y || true
  fi
}
install_cloud_init() {
  local attempt=0 pause=15
  while true; do
    attempt=$((attempt + 1))
    recover_dpkg
    "${apt[@]}" update && DEBIAN_FRONTEND=noninteractive "${apt[@]}" install -y cloud-init && return 0
    [ "$SECONDS" -lt "$GIVE_UP_S" ] || return 1
    log "installing cloud-init failed (attempt $attempt); trying again in ${pause}s"
    sleep "$pause"
    pause=$((pause * 2 > 300 ? 300 : pause * 2))
  done
}
if ! command -v cloud-init >/dev/null 2>&1 || [ -n "$(dpkg --audit 2>/dev/null)" ]; then
  log "installing cloud-init"
  if ! install_cloud_init; then
    log "FAILED to install cloud-init for $((GIVE_UP_S / 60)) min: the VM cannot reach the Debian archive." \
      "Powering off so that it does not bill; fix the VM's egress, then start it (this script runs at every boot)"
    systemctl poweroff
    exit 1
  fi
fi

# Every stage runs even when an earlier one reports a module error, so one bad module does not
# silently skip the final stage (the one that enables and starts the service).
failed=()
for stage in "init" "modules --mode=config" "modules --mode=final"; do
  log "cloud-init $stage"
  # shellcheck disable=SC2086 # the stage is two words on purpose
  cloud-init $stage || failed+=("$stage")
done
if [ "${#failed[@]}" -gt 0 ]; then
  log "FAILED: cloud-init reported errors in: ${failed[*]}. See 'cloud-init status --long' and" \
    "/var/log/cloud-init.log; the next boot runs the stages again"
  exit 1
fi
mkdir -p "$(dirname "$done_marker")"
date -u +%FT%TZ >"$done_marker"
log "cloud-init done for this instance"
