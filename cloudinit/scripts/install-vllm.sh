#!/bin/bash
# vLLM in its own virtualenv on the data disk, exactly as locked (cloudinit/locks/: every package
# pinned with its hash, wheels only), then the Turing clamp into the same venv.
# /tmp is a 3.9 GB filesystem on the GCE image: pip unpacks and caches on the data disk.
# Safe to run on every boot, and offline once done: a venv that matches the lock and a clamp
# that matches the shipped source are left alone, so a reboot needs no package index.
set -euo pipefail

: "${VENV:?}" "${PYTHON:?}" "${VLLM_LOCK:?}" "${CLAMP_SRC:?}" "${DATA_MOUNT:?}"
log() { echo "install-vllm: $*"; }

export TMPDIR="$DATA_MOUNT/tmp" PIP_CACHE_DIR="$DATA_MOUNT/pipcache"
mkdir -p "$TMPDIR" "$PIP_CACHE_DIR"
pip=("$VENV/bin/python" -m pip --disable-pip-version-check)

lock_stamp=$VENV/.gemma4-t4-lock.sha256
want=$(sha256sum "$VLLM_LOCK" | cut -d' ' -f1)
if [ "$(cat "$lock_stamp" 2>/dev/null || true)" = "$want" ]; then
  log "$VENV matches $VLLM_LOCK"
else
  # A venv whose creation was stopped half-way (no pip yet) is made again: it is ours, and empty.
  if ! "$VENV/bin/python" -m pip --version >/dev/null 2>&1; then
    rm -rf "$VENV"
    "$PYTHON" -m venv "$VENV"
  fi
  # The lock is complete (--no-deps) and hashed (pip refuses any other file); never a source build.
  "${pip[@]}" install --require-hashes --no-deps --only-binary :all: -r "$VLLM_LOCK"
  echo "$want" >"$lock_stamp"
  log "installed $VLLM_LOCK into $VENV"
fi

# The clamp: pure Python, built with the venv's own setuptools (in the lock), no index needed.
clamp_stamp=$VENV/.gemma4-t4-clamp.sha256
want=$(find "$CLAMP_SRC" -type f \( -name '*.py' -o -name '*.toml' \) -print0 | sort -z | xargs -0 sha256sum |
  sha256sum | cut -d' ' -f1)
if [ "$(cat "$clamp_stamp" 2>/dev/null || true)" = "$want" ]; then
  log "the Turing clamp matches $CLAMP_SRC"
else
  build=$(mktemp -d)
  cp -r "$CLAMP_SRC/." "$build/"
  "${pip[@]}" install --quiet --no-index --no-deps --no-build-isolation --force-reinstall "$build"
  rm -rf "$build"
  echo "$want" >"$clamp_stamp"
  log "installed the Turing clamp from $CLAMP_SRC"
fi

# Triton builds its launcher against the venv's Python.h on the first GPU kernel.
include=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
[ -f "$include/Python.h" ] || { echo "install-vllm: no $include/Python.h: install $PYTHON-dev" >&2; exit 1; }
