#!/bin/bash
# Brings the VM to "ready to serve" on every boot: each step checks before it acts, so a
# second run, a reboot or a replaced VM with the old data disk all end in the same state.
# A failed step names itself and the fix. Most failures heal by themselves (a mirror blip, an index that
# throttles): the phase is `retrying` and systemd runs this again (Restart=on-failure). A step that exits
# $TERMINAL (3) says that trying again cannot help (a lock whose files do not match it, a driver that never
# loads): the phase is `failed`, and the unit stops retrying (RestartPreventExitStatus=3) until a person
# acts or the VM boots again. gemma4-vllm's preflight says what is still missing meanwhile.
# The network's work runs beside the driver's build: vLLM's wheels, then (best effort) the model's snapshot and the
# clamp's fit check are a background job (vllm_job) started as the driver's step starts, so the downloads go on while
# the compiler builds the module. A job is a step like the others: its failure is reported as its own step (retried,
# or not when it exits $TERMINAL), once the steps before its join are done; provisioning never exits with a job still
# running (a failure waits for them, so a download is not thrown away half-way), and the driver's reboot waits for them.
set -euo pipefail

lib=${GEMMA4_T4_LIB:-/usr/local/lib/gemma4-t4}
log() { echo "provision: $*"; }

# phase PHASE [DETAIL]: the boot's phase for a person without SSH (guest attributes, published by
# gemma4-t4-progress.service); it never fails a step.
phase() { python3 "$lib/guest_attributes.py" phase "$@" || true; }

TERMINAL=3

# attempt: this run's number since the boot began (systemd counts the unit's automatic restarts).
attempt() { echo $(($(systemctl show -P NRestarts gemma4-t4-provision.service 2>/dev/null || echo 0) + 1)); }

# The background jobs still running: step name -> pid (job, join).
declare -A background=()
# Where a job says which part of its work it is at (stage), for the phase while provisioning waits for it (join).
stages=${GEMMA4_T4_STAGES:-/run/gemma4-t4/stages}

# settle: wait for every background job still running: provisioning is leaving (a failure), and their work is kept,
# not killed half-way. Each one's end is logged; a job that failed runs again with the next attempt.
settle() {
  local name rc
  for name in "${!background[@]}"; do
    rc=0
    wait "${background[$name]}" || rc=$?
    unset "background[$name]"
    log "step '$name' (in the background) ended with exit $rc"
  done
}

# give_up STEP DETAIL: a failure trying again cannot heal; the unit stops retrying (exit $TERMINAL).
give_up() {
  echo "provision: FAILED at step '$1', not retried: $2. After fixing it: sudo systemctl restart" \
    "gemma4-t4-provision (a reboot also tries again)" >&2
  phase failed "step '$1', not retried: $2"
  settle
  exit "$TERMINAL"
}

# outcome NAME FIX RC: a step's exit status RC said as the step's: nothing for 0; $TERMINAL gives up; any other
# failure is retried (the phase `retrying`, and this run ends with RC).
outcome() {
  local name=$1 fix=$2 rc=$3
  [ "$rc" -ne 0 ] || return 0
  [ "$rc" -ne "$TERMINAL" ] || give_up "$name" "Fix: $fix"
  echo "provision: FAILED at step '$name' (exit $rc). Fix: $fix." \
    "Provisioning retries by itself; to retry now: sudo systemctl restart gemma4-t4-provision" >&2
  phase retrying "step '$name' (exit $rc, attempt $(attempt)), retried every 30 s. Fix: $fix"
  settle
  exit "$rc"
}

# step NAME FIX COMMAND...: run one step; on failure say which step failed and what to do.
step() {
  local name=$1 fix=$2 rc=0
  shift 2
  log "step '$name'"
  "$@" || rc=$?
  outcome "$name" "$fix" "$rc"
}

# job NAME COMMAND...: step NAME, run in the background beside the steps after it; join NAME ends it.
job() {
  local name=$1
  shift
  log "step '$name' (in the background)"
  "$@" &
  background[$name]=$!
}

# stage JOB PHASE DETAIL: what job JOB is doing now (its phase once provisioning waits for it).
stage() {
  mkdir -p "$stages" && echo "$2 $3" >"$stages/$1.new" && mv -f "$stages/$1.new" "$stages/$1" || true
}

# show_stage JOB: while provisioning waits for job JOB, its stage is the boot's phase (until killed).
show_stage() {
  local seen="" now
  while sleep 2; do
    now=$(cat "$stages/$1" 2>/dev/null) || continue
    [ "$now" != "$seen" ] || continue
    seen=$now
    phase "${now%% *}" "${now#* }"
  done
}

# join NAME FIX: wait for job NAME and say its end as step NAME's (outcome); a job still at work when provisioning
# reaches it shows its stage as the phase meanwhile.
join() {
  local name=$1 fix=$2 rc=0 shower
  show_stage "$name" &
  shower=$!
  wait "${background[$name]}" || rc=$?
  unset "background[$name]"
  kill "$shower" 2>/dev/null || true
  wait "$shower" 2>/dev/null || true
  rm -f "$stages/$name"
  outcome "$name" "$fix" "$rc"
}

# Packages the guest itself needs. python3.13-dev and gcc: Triton compiles a small C launcher
# against Python.h the first time it runs a kernel on the GPU; g++: Inductor compiles C++ when a
# graph needs it (the image has no compiler). Every apt-get waits for apt's lock
# (/etc/apt/apt.conf.d/90gemma4-t4-lock): the image's apt timers start as provisioning does.
packages() {
  local missing=() pkg
  for pkg in curl ca-certificates gcc g++ "$PYTHON-venv" "$PYTHON-dev"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'ok installed' || missing+=("$pkg")
  done
  [ "${#missing[@]}" -eq 0 ] && return 0
  apt-get update && apt-get install -y --no-install-recommends "${missing[@]}"
}

# The service user's UID comes from the data disk: a replaced VM gets a new boot disk (and any
# UID useradd picks there), while the caches on the data disk keep their old owner.
service_user() {
  local home=$DATA_MOUNT/home disk_uid
  if ! id "$SERVICE_USER" >/dev/null 2>&1; then
    disk_uid=$(stat -c %u "$home" 2>/dev/null || true)
    if [ -n "$disk_uid" ] && [ "$disk_uid" -ne 0 ] && ! getent passwd "$disk_uid" >/dev/null &&
      ! getent group "$disk_uid" >/dev/null; then
      groupadd --system --gid "$disk_uid" "$SERVICE_USER"
      useradd --system --uid "$disk_uid" --gid "$disk_uid" --home-dir "$home" --no-create-home \
        --shell /usr/sbin/nologin "$SERVICE_USER"
      log "created $SERVICE_USER with the data disk's UID $disk_uid"
    else
      useradd --system --user-group --home-dir "$home" --no-create-home --shell /usr/sbin/nologin "$SERVICE_USER"
      log "created $SERVICE_USER (UID $(id -u "$SERVICE_USER"))"
    fi
  fi
  install -d -o "$SERVICE_USER" -g "$SERVICE_USER" "$home" "$DATA_MOUNT/cache"
  # A disk whose files another UID owns (its UID was taken on this boot disk): hand them over.
  if [ -n "$(find "$home" "$DATA_MOUNT/cache" -xdev ! -user "$SERVICE_USER" -print -quit)" ]; then
    chown -R "$SERVICE_USER:$SERVICE_USER" "$home" "$DATA_MOUNT/cache"
    log "re-owned $home and $DATA_MOUNT/cache to $SERVICE_USER"
  fi
  install -d -o "$SERVICE_USER" -g "$SERVICE_USER" "$DATA_MOUNT/cache/tmp"
}

# The vLLM venv (install-vllm.sh: this job's outcome), then, best effort and beside each other, the model's snapshot
# and the clamp's fit check (prefetch.sh), which vLLM's start would otherwise do (a failure of either only logs).
vllm_job() {
  stage vllm vllm-install "vLLM's wheels from $VLLM_LOCK into $VENV (beside the driver's build)"
  "$lib/install-vllm.sh" || return
  stage vllm model-download "the model's snapshot and the Turing clamp's fit check, before vLLM starts"
  local model fit
  "$lib/prefetch.sh" model &
  model=$!
  "$lib/prefetch.sh" fit &
  fit=$!
  wait "$model" || log "the model was not fetched ahead (above): vLLM downloads it at its start"
  wait "$fit" || log "the clamp's fit check did not pass ahead (above): vLLM's preflight runs it again"
}

# reboot_for_driver: once every step and job is done, the reboot that loads the driver when its install asked for
# one (REBOOT_FLAG); none when the module loaded at install. Bounded: a driver that never loads must not reboot the
# VM forever.
reboot_for_driver() {
  local count_file=/var/lib/gemma4-t4/driver-reboots count
  [ -f "$REBOOT_FLAG" ] || { rm -f "$count_file"; return 0; }
  mkdir -p "$(dirname "$count_file")"
  count=$(cat "$count_file" 2>/dev/null || echo 0)
  if [ "$count" -ge 2 ]; then
    rm -f "$count_file" # the next boot (a person's reboot after a fix) tries again from the start
    give_up "nvidia driver" "not loaded after $count reboots. Fix: read 'journalctl -k' and 'dkms status'; the kernel may lack headers (see above)"
  fi
  echo $((count + 1)) >"$count_file"
  log "rebooting to load the NVIDIA driver (reboot $((count + 1)) of at most 2)"
  phase reboot "loading the NVIDIA driver (reboot $((count + 1)) of at most 2)"
  # The boot after this one continues this boot's health window: the idle stop's bound covers the whole
  # first boot, driver reboot included (a mark that is lost only gives the next boot a window of its own).
  python3 "$lib/idle_stop.py" carry || log "could not mark the reboot for the idle stop's health window"
  systemctl reboot
  exit 0
}

# This boot's run is done once it ends without a failure (gemma4-vllm's preflight reads the mark); a new run is not.
provisioned_mark=/run/gemma4-t4/provisioned

main() {
  set -a
  # shellcheck source=/dev/null
  . /etc/gemma4-t4/guest.env
  # The boot test's own settings (the plan never writes this file; tests/guest/ does).
  # shellcheck source=/dev/null
  if [ -f /etc/gemma4-t4/test.env ]; then . /etc/gemma4-t4/test.env; fi
  set +a
  export DEBIAN_FRONTEND=noninteractive
  rm -f "$provisioned_mark"
  # The preflight's refusal (preflight.sh) is kept across boots; it speaks of the run before this one, which may fix it.
  rm -f /var/lib/gemma4-vllm/refused
  phase provision "data disk, service user, packages, swap"
  local driver_fix="check that the VM reaches $CUDA_REPO_URL (egress through its external address) and the Debian archive; see the apt output above"
  step "data disk" "attach the data disk as device '${DATA_DEVICE##*/google-}'; never format a disk with data by hand" \
    "$lib/setup-data-disk.sh" "$DATA_DEVICE" "$DATA_MOUNT"
  step "service user" "see the message above" service_user
  step "dpkg" "run 'sudo dpkg --configure -a', then 'sudo apt-get -f install', and read their errors" \
    "$lib/dpkg-recover.sh"
  step "packages" "check that the VM reaches the Debian archive (apt-get update)" packages
  step "swap" "free space on $DATA_MOUNT, or gemma4-t4:swapSizeGb" "$lib/setup-swap.sh" "$DATA_MOUNT/swapfile" "$SWAP_SIZE_GB"
  rm -f "$REBOOT_FLAG"
  # Network beside CPU: vLLM's wheels and the model download while the compiler builds the driver's module.
  phase driver "NVIDIA driver $DRIVER_BRANCH (a DKMS build on the first boot); beside it, vLLM's wheels and the model"
  job "vllm" vllm_job
  step "nvidia driver" "$driver_fix" "$lib/install-driver.sh"
  join "vllm" "check that the VM reaches PyPI; the lock is $VLLM_LOCK"
  reboot_for_driver
  mkdir -p "$(dirname "$provisioned_mark")"
  touch "$provisioned_mark"
  log "ready: $(nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader)"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then main; fi
