#!/bin/bash
# Prints PyTorch's CPU index (catalog: torch.cpu_index_url) if this machine reaches it, else
# nothing. PyPI's Linux torch is a CUDA build that pulls GBs of NVIDIA wheels, so the CPU build is
# taken where that index answers; probed once, an index that cannot be reached costs 5 s, not a
# round of pip's retries for every package it resolves. Used by the Makefile and the image test.
#   [PYTHON=a python that imports gemma4_t4] torch-cpu-index.sh
set -uo pipefail
python=${PYTHON:-python3}
url=$("$python" -m gemma4_t4.catalog get torch.cpu_index_url) || exit 1
if "$python" -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1] + "/torch/", timeout=5)' "$url" \
  2>/dev/null; then
  echo "$url"
fi
