#!/bin/bash
# vLLM in its own virtualenv on the data disk, then the Turing clamp into the same venv.
# /tmp is a 3.9 GB filesystem on the GCE image: pip unpacks and caches on the data disk.
# Safe to run on every boot: an installed pinned vLLM is kept, the clamp is re-installed
# (cheap) so it always matches the shipped source, and the sm_75 gate runs each time.
set -euo pipefail

: "${VENV:?}" "${PYTHON:?}" "${VLLM_VERSION:?}" "${TORCH_INDEX_URL:?}" "${CLAMP_SRC:?}" "${DATA_MOUNT:?}"
log() { echo "install-vllm: $*"; }
die() { echo "install-vllm: $*" >&2; exit 1; }

export TMPDIR="$DATA_MOUNT/tmp" PIP_CACHE_DIR="$DATA_MOUNT/pipcache"
mkdir -p "$TMPDIR" "$PIP_CACHE_DIR"

installed=$("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("vllm"))' 2>/dev/null || true)
if [ "$installed" = "$VLLM_VERSION" ]; then
  log "vllm $installed already installed in $VENV"
else
  [ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
  # Never --no-deps: torch then fails on libcudnn.so.9 (seed 000).
  "$VENV/bin/pip" install --upgrade-strategy eager --extra-index-url "$TORCH_INDEX_URL" "vllm==$VLLM_VERSION"
  log "installed vllm $VLLM_VERSION (was: ${installed:-none})"
fi

"$VENV/bin/pip" install --quiet --force-reinstall --no-deps "$CLAMP_SRC"
log "installed the Turing clamp from $CLAMP_SRC"

# The cu130 torch wheels carry sm_75; a build without it cannot run on a T4 at all.
# The compiled-in arch flags are read without touching a GPU.
arch_flags=$("$VENV/bin/python" -c 'import torch; print(torch._C._cuda_getArchFlags())')
case " $arch_flags " in
  *" sm_75 "*) log "torch carries sm_75 ($arch_flags)" ;;
  *) die "torch in $VENV has no sm_75 kernels (arch flags: $arch_flags); refusing to go on" ;;
esac
