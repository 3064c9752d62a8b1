#!/bin/bash
# A virtualenv in which vLLM VERSION imports on a machine without a GPU, for the fit checker:
# the vllm wheel without its GPU dependencies, CPU torch, and the Triton that vLLM's own torch
# pins (so the checker compiles with the compiler the T4 will run), plus this checkout's clamp.
# The Makefile passes the versions from the catalog (`make fit-env`).
set -euo pipefail

# TORCH_CPU_INDEX: PyTorch's CPU wheel index, or "" where it cannot be reached (PyPI's build then).
usage="usage: fit-env.sh VLLM_VERSION TRITON_VERSION TORCH_VERSION TORCH_CPU_INDEX DEST"
[ $# -eq 5 ] || { echo "$usage" >&2; exit 2; }
version=$1 triton=$2 torch=$3 torch_index=$4 dest=$5
extra=()
[ -z "$torch_index" ] || extra=(--extra-index-url "$torch_index")
here=$(cd "$(dirname "$0")" && pwd)

rm -rf "$dest"
python3 -m venv "$dest"
pip=("$dest/bin/pip" install --quiet --disable-pip-version-check)
"${pip[@]}" "${extra[@]}" "torch==$torch" packaging regex numpy
# The fit checker compiles with the Triton the T4 will run. A CUDA build of torch (PyPI's, where the
# CPU index cannot be reached) pins its own Triton, which may be another: torch only runs vLLM's
# launcher on CPU tensors here, so the pinned Triton goes in over it.
"${pip[@]}" --no-deps --force-reinstall "triton==$triton"
"${pip[@]}" --no-deps "vllm==$version"
"${pip[@]}" --no-deps --editable "$here"
"$dest/bin/python" -c "import torch, triton; print('fit env', '$version', 'torch', torch.__version__, 'triton', triton.__version__)"
