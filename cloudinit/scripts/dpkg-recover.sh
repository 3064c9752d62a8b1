#!/bin/bash
# Provisioning's first apt step: leaves dpkg consistent, whatever stopped it before.
#
# A stop, a Spot preemption or provisioning's own timeout during an install leaves dpkg half-done, and
# every apt-get then fails with "dpkg was interrupted". Stopped while configuring (the driver's DKMS build
# takes minutes), packages are unpacked and `dpkg --configure -a` finishes them. Stopped while unpacking,
# the package is half-installed and reinstall-required (dpkg --audit: "in a mess ... must be reinstalled"):
# no configure finishes it, and a package unpacked before it that depends on it, or on a package never
# unpacked, fails to configure ("dependency problems - leaving unconfigured") at every try. Debian's
# remedies, in order: `apt-get -f install` for the missing dependencies (apt-get(8), --fix-broken: "attempt
# to correct a system with broken dependencies in place"), and `apt-get install --reinstall` of the
# half-installed packages: -f install alone only configures them again (apt-pkg/algorithms.cc,
# pkgApplyStatus keeps a reinstall-required package at its version), which fails the same way.
# dpkg waits for no lock: retry while apt's timers (unattended-upgrades) hold it.
set -uo pipefail
export DEBIAN_FRONTEND=noninteractive
log() { echo "dpkg-recover: $*"; }
# dpkg's state directory (a test points it elsewhere).
updates=${DPKG_UPDATES_DIR:-/var/lib/dpkg/updates}

dpkg_consistent() {
  [ -z "$(dpkg --audit 2>/dev/null)" ] && [ -z "$(ls -A "$updates" 2>/dev/null)" ]
}
# half_installed: the packages dpkg marks half-installed (H) or reinstall-required (R).
half_installed() {
  dpkg-query -W -f='${db:Status-Abbrev} ${binary:Package}\n' 2>/dev/null | awk '$1 ~ /^.H|^..R/ {print $2}' | xargs
}

main() {
  local attempt half
  dpkg_consistent && return 0
  log "dpkg was interrupted: finishing its work (dpkg --configure -a)"
  for attempt in $(seq 1 20); do
    dpkg --configure -a || log "dpkg --configure -a did not finish (apt's lock, or a half-installed dependency)"
    dpkg_consistent && return 0
    # Only with dpkg's journal replayed: apt-get refuses to run before ("dpkg was interrupted").
    if [ -z "$(ls -A "$updates" 2>/dev/null)" ]; then
      apt-get update || log "apt-get update failed: trying with the package lists on disk"
      log "installing missing dependencies: apt-get -f install"
      apt-get -f install -y || log "apt-get -f install did not finish"
      half=$(half_installed)
      if [ -n "$half" ]; then
        log "reinstalling what dpkg left half-installed: apt-get install --reinstall $half"
        # shellcheck disable=SC2086 # one package name per word
        apt-get install --reinstall -y $half || log "the reinstall did not finish"
      fi
      dpkg --configure -a && dpkg_consistent && return 0
    fi
    log "dpkg is not consistent yet (attempt $attempt of 20); retrying in 30 s"
    sleep 30
  done
  dpkg --audit >&2
  return 1
}

main
