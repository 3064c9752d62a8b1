#!/bin/bash
# gemma4-vllm.service's ExecStart: vLLM's OpenAI server with $VLLM_ARGS (split into words on
# purpose). Once the model's snapshot is whole on the data disk (the first healthy start downloaded
# it), vLLM is told not to ask the Hub (HF_HUB_OFFLINE=1): a reboot without network serves the same
# Hub id from the disk, as it did before, instead of failing on the Hub's revision lookup.
set -euo pipefail

# model_arg ARGS...: the value of --model (or --model=VALUE) in vLLM's arguments.
model_arg() {
  while [ "$#" -gt 0 ]; do
    case $1 in
      --model) echo "${2:-}"; return 0 ;;
      --model=*) echo "${1#--model=}"; return 0 ;;
    esac
    shift
  done
}

# snapshot_whole HUB_CACHE MODEL_ID: the snapshot huggingface_hub wrote for MODEL_ID is complete: its
# refs/main names a snapshot holding config.json and every weight file the index lists (or
# model.safetensors), and no download is left half-done (blobs/*.incomplete).
snapshot_whole() {
  local repo=$1/models--${2//\//--} commit snapshot shard
  commit=$(cat "$repo/refs/main" 2>/dev/null) || return 1
  snapshot=$repo/snapshots/$commit
  [ -f "$snapshot/config.json" ] || return 1
  if compgen -G "$repo/blobs/*.incomplete" >/dev/null; then return 1; fi
  if [ -f "$snapshot/model.safetensors.index.json" ]; then
    for shard in $(grep -o '"[^"]*\.safetensors"' "$snapshot/model.safetensors.index.json" | tr -d '"' | sort -u); do
      [ -f "$snapshot/$shard" ] || return 1
    done
    return 0
  fi
  [ -f "$snapshot/model.safetensors" ]
}

main() {
  local model venv_dir
  # shellcheck disable=SC2086 # vLLM's arguments are one flag or value per word
  model=$(model_arg $VLLM_ARGS)
  if [ -z "${HF_HUB_OFFLINE:-}" ] && [ -n "$model" ] && [ "${model#/}" = "$model" ] &&
    snapshot_whole "$HF_HOME/hub" "$model"; then
    echo "serve: $model is whole on the data disk: serving it without asking the Hub (HF_HUB_OFFLINE=1)"
    export HF_HUB_OFFLINE=1
  fi
  # The venv $VENV points to now, by its own path: a later switch of $VENV (an upgrade's install) does not
  # move this process, and prune-venvs.sh sees which venv serves.
  venv_dir=$(readlink -f "$VENV")
  # shellcheck disable=SC2086
  exec "$venv_dir/bin/python" -m vllm.entrypoints.openai.api_server $VLLM_ARGS
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then main; fi
