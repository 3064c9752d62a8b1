#!/bin/bash
# What vLLM's first start would otherwise do itself, done ahead by provisioning beside the driver's build (best
# effort: a failure exits non-zero and provisioning only logs it; vLLM's start then does the work as before):
#   prefetch.sh model   the model's snapshot at its --revision (main when none) into the service's Hub cache, the
#                       files vLLM asks for (prefetch_model.py), with the Hub token read as serve.sh reads it.
#                       Skipped for a path on the VM, a snapshot already whole (serve.sh's snapshot_whole: vLLM then
#                       serves it without asking the Hub) and HF_HUB_OFFLINE.
#   prefetch.sh fit     turing_clamp fit --strict into the cache the preflight reads: it compiles for sm_75 and needs
#                       no GPU, so it runs before the driver loads. Skipped where the preflight skips it (the boot
#                       test's CPU stand-in).
# Both run as the service user with vLLM's environment (vllm.env), inside provisioning's cgroup (setpriv starts no
# session), where the idle stop counts their work as the boot's progress.
set -euo pipefail

: "${VENV:?}" "${SERVICE_USER:?}"
here=$(dirname "${BASH_SOURCE[0]}")
# flag_value, split_args, snapshot_whole: serve.sh's own (it runs nothing when sourced).
# shellcheck source=/dev/null
. "$here/serve.sh"
log() { echo "prefetch: $*"; }
serving_env=${GEMMA4_T4_VLLM_ENV:-/etc/gemma4-t4/vllm.env}

# value KEY: KEY's value in vllm.env as written (the file is never run by a shell: VLLM_ARGS holds quotes).
value() { sed -n "s/^$1=//p" "$serving_env" | tail -n 1; }

# as_service COMMAND...: COMMAND as the service user, with vLLM's HOME, Hub cache, vLLM cache and temporary folder
# (vllm.env), and the boot test's Hub stand-in (HF_ENDPOINT) when one is set.
as_service() {
  local env=(PATH=/usr/local/bin:/usr/bin:/bin HOME="$(value HOME)" HF_HOME="$(value HF_HOME)"
    VLLM_CACHE_ROOT="$(value VLLM_CACHE_ROOT)" TMPDIR="$(value TMPDIR)" HF_HUB_DISABLE_PROGRESS_BARS=1)
  if [ -n "${HF_ENDPOINT:-}" ]; then env+=(HF_ENDPOINT="$HF_ENDPOINT"); fi
  setpriv --reuid "$SERVICE_USER" --regid "$SERVICE_USER" --init-groups env -i "${env[@]}" "$@"
}

# hub_token: the Hub token from the stack's secret, as serve.sh reads it (empty without one); never a file or a log.
hub_token() {
  local secret
  secret=$(value HF_TOKEN_SECRET)
  if [ -n "$secret" ]; then python3 "$here/hf_token.py" "$secret"; fi
}

fetch_model() {
  local python=$VENV/bin/python hub args model revision token
  hub=$(value HF_HOME)/hub
  mapfile -d '' -t args < <(split_args "$python" "$(value VLLM_ARGS)")
  wait "$!" || { log "VLLM_ARGS in $serving_env is not a line of quoted arguments"; return 1; }
  model=$(flag_value --model "${args[@]}")
  revision=$(flag_value --revision "${args[@]}")
  if [ -z "$model" ] || [ "${model#/}" != "$model" ]; then
    log "the model is a path on the VM (${model:-none}): nothing to download"
  elif [ -n "${HF_HUB_OFFLINE:-}" ]; then
    log "HF_HUB_OFFLINE is set: vLLM serves $model from the disk as it is"
  elif snapshot_whole "$hub" "$model" "$revision"; then
    log "$model is whole on the data disk"
  else
    token=$(hub_token) || { log "the Hub token could not be read (above)"; return 1; }
    log "downloading $model at ${revision:-main} into $hub, beside the driver's build"
    printf '%s' "$token" | as_service "$python" "$here/prefetch_model.py" "$model" "${revision:-main}"
    snapshot_whole "$hub" "$model" "$revision" || { log "the snapshot of $model is not whole yet"; return 1; }
    log "$model is whole on the data disk: vLLM serves it without asking the Hub"
  fi
}

warm_fit() {
  if [ "${GEMMA4_T4_ALLOW_CPU_STANDIN:-0}" = 1 ]; then
    log "the boot test's CPU stand-in: no fit check (the preflight skips it too)"
    return 0
  fi
  # The preflight's own cache (preflight.sh: VLLM_CACHE_ROOT/turing-fit): it then reads this run's report.
  as_service "$VENV/bin/python" -m turing_clamp fit --strict --cache-dir "$(value VLLM_CACHE_ROOT)/turing-fit"
}

main() {
  [ -f "$serving_env" ] || { log "no $serving_env yet: vLLM's start does this"; return 1; }
  case ${1:-} in
    model) fetch_model ;;
    fit) warm_fit ;;
    *) echo "usage: prefetch.sh model|fit" >&2; return 2 ;;
  esac
}

main "$@"
