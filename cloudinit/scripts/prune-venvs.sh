#!/bin/bash
# Once vLLM answers healthy from the venv $VENV points to, remove the other vLLM venvs on the data disk: the
# version before an upgrade (kept until now, so a new version that never serves leaves the old one on disk)
# and 0.2.0's $DATA_MOUNT/vllm/venv. gemma4-vllm.service wants this unit; it waits for /health, bounded.
set -euo pipefail

: "${VENV:?}" "${METRICS_URL:?}"
log() { echo "prune-venvs: $*"; }
health=${METRICS_URL%/metrics}/health
wait_s=${PRUNE_WAIT_S:-3600}

# serving_from_current: vLLM is healthy, and the process serving has files of the venv $VENV points to now
# mapped (a vLLM started before an install switched $VENV still runs from the old one). Its memory maps, not its
# command line: vLLM may retitle its processes (setproctitle).
serving_from_current() {
  local pid current
  curl -fsS -o /dev/null --max-time 5 "$health" || return 1
  current=$(readlink -f "$VENV") || return 1
  pid=$(systemctl show -P MainPID gemma4-vllm.service)
  [ -n "$pid" ] && [ "$pid" != 0 ] || return 1
  grep -qF " $current/" "/proc/$pid/maps" 2>/dev/null
}

# wait_serving_under_lock: vLLM serves from the current venv, checked again holding install-vllm.sh's lock (fd 9), so
# no install is making a venv that $VENV does not name yet; false: not within $wait_s.
exec 9>"$(dirname "$VENV")/.venvs.lock"
wait_serving_under_lock() {
  local start=$SECONDS
  while true; do
    if serving_from_current; then
      flock 9
      serving_from_current && return 0
      flock -u 9 # an install switched $VENV meanwhile: wait for vLLM to serve from the new one
    fi
    [ $((SECONDS - start)) -lt "$wait_s" ] || return 1
    sleep 15
  done
}

if ! wait_serving_under_lock; then
  log "vLLM has not served from $(readlink -f "$VENV") within ${wait_s} s: keeping every venv"
  exit 0
fi

current=$(readlink -f "$VENV")
for dir in "$(dirname "$VENV")"/venv "$(dirname "$VENV")"/venv-*; do
  [ -d "$dir" ] && [ ! -L "$dir" ] && [ "$(readlink -f "$dir")" != "$current" ] || continue
  log "vLLM serves from $current: removing $dir"
  rm -rf "$dir"
done
