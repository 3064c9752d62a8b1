#!/bin/bash
# gemma4-vllm.service's ExecStart: vLLM's OpenAI server with the arguments $VLLM_ARGS holds (one line,
# quoted as a shell quotes: components/guest.py writes it with shlex.join, and systemd's EnvironmentFile
# hands it over as written), split by shlex into an array: a value with a space stays one argument, and
# nothing in it is globbed. Once the model's snapshot (at its --revision, else main) is whole on the data disk (the
# first healthy start downloaded it), vLLM is told not to ask the Hub (HF_HUB_OFFLINE=1): a reboot without network
# serves the same Hub id from the disk, as it did before, instead of failing on the Hub's revision lookup.
set -euo pipefail

# flag_value FLAG ARGS...: the value of FLAG (or FLAG=VALUE) in vLLM's arguments.
flag_value() {
  local flag=$1
  shift
  while [ "$#" -gt 0 ]; do
    case $1 in
      "$flag") echo "${2:-}"; return 0 ;;
      "$flag"=*) echo "${1#"$flag"=}"; return 0 ;;
    esac
    shift
  done
}

# model_arg ARGS...: the value of --model in vLLM's arguments.
model_arg() { flag_value --model "$@"; }

# snapshot_whole HUB_CACHE MODEL_ID [REVISION]: the snapshot huggingface_hub wrote for MODEL_ID at REVISION
# (vLLM's --revision; main when none) is complete: the snapshot (a commit's own directory, or the one
# refs/BRANCH-OR-TAG names; huggingface_hub writes no ref for a commit) holds config.json and every weight
# file the index lists (or model.safetensors), and no download is left half-done (blobs/*.incomplete).
snapshot_whole() {
  local repo=$1/models--${2//\//--} revision=${3:-main} commit snapshot shard
  if [[ $revision =~ ^[0-9a-f]{40}$ ]]; then
    commit=$revision
  else
    commit=$(cat "$repo/refs/$revision" 2>/dev/null) || return 1
  fi
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

# split_args PYTHON TEXT: TEXT's arguments as shlex.split reads them (the inverse of the shlex.join that
# wrote them), each ended by a NUL.
split_args() {
  "$1" -c 'import shlex, sys; sys.stdout.write("".join(a + "\0" for a in shlex.split(sys.argv[1])))' "$2"
}

main() {
  local model revision venv_dir
  local -a args
  # The venv $VENV points to now, by its own path: a later switch of $VENV (an upgrade's install) does not
  # move this process, and prune-venvs.sh sees which venv serves.
  venv_dir=$(readlink -f "$VENV")
  mapfile -d '' -t args < <(split_args "$venv_dir/bin/python" "${VLLM_ARGS:-}")
  if ! wait "$!"; then
    echo "serve: VLLM_ARGS is not a line of quoted arguments: $VLLM_ARGS" >&2
    exit 1
  fi
  model=$(model_arg "${args[@]}")
  revision=$(flag_value --revision "${args[@]}")
  if [ -z "${HF_HUB_OFFLINE:-}" ] && [ -n "$model" ] && [ "${model#/}" = "$model" ] &&
    snapshot_whole "$HF_HOME/hub" "$model" "$revision"; then
    echo "serve: $model is whole on the data disk: serving it without asking the Hub (HF_HUB_OFFLINE=1)"
    export HF_HUB_OFFLINE=1
  fi
  # hfToken (a gated or private model): read from the stack's Secret Manager secret while vLLM may need the Hub,
  # and handed to vLLM in its environment only: never a file, never a log line.
  if [ -n "${HF_TOKEN_SECRET:-}" ] && [ -z "${HF_HUB_OFFLINE:-}" ]; then
    if ! HF_TOKEN=$(python3 "$(dirname "${BASH_SOURCE[0]}")/hf_token.py" "$HF_TOKEN_SECRET"); then
      echo "serve: the Hub token could not be read from $HF_TOKEN_SECRET (above); vLLM starts again in 30 s" >&2
      exit 1
    fi
    export HF_TOKEN
  fi
  exec "$venv_dir/bin/python" -m vllm.entrypoints.openai.api_server "${args[@]}"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then main; fi
