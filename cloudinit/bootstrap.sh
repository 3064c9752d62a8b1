#!/bin/bash
# GCE startup-script. The official Debian images ship no cloud-init, so GCE's user-data
# would be ignored: on first boot this installs Debian's cloud-init and runs its stages once,
# which reads the same user-data from the metadata server. From then on cloud-init's own
# units run at boot, and this script only confirms that.
set -euo pipefail
log() { echo "gemma4-t4 bootstrap: $*"; }

if [ -f /var/lib/cloud/instance/boot-finished ]; then
  log "cloud-init has run for this instance"
  exit 0
fi

if ! command -v cloud-init >/dev/null 2>&1; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update
  apt-get install -y cloud-init
fi

mkdir -p /etc/cloud/cloud.cfg.d
cat >/etc/cloud/cloud.cfg.d/90-gemma4-t4.cfg <<'CFG'
# Written by the gemma4-t4 bootstrap: read user-data from GCE's metadata server only.
datasource_list: [GCE, None]
CFG

log "running cloud-init for this instance"
cloud-init init --local
cloud-init init
cloud-init modules --mode=config
cloud-init modules --mode=final
