#!/bin/bash
# A virtualenv in which vLLM VERSION imports on a machine without a GPU, for the fit checker:
# the vllm wheel without its GPU dependencies, CPU torch, and the Triton that vLLM's own torch
# pins (so the checker compiles with the compiler the T4 will run), plus this checkout's clamp.
set -euo pipefail

version=${1:?usage: fit-env.sh VLLM_VERSION DEST}
dest=${2:?usage: fit-env.sh VLLM_VERSION DEST}
here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
catalog() { (cd "$repo" && python3 -m gemma4_t4.catalog get "$1"); }
triton=$(catalog "triton.for_vllm.$version")
torch=$(catalog torch.cpu)

rm -rf "$dest"
python3 -m venv "$dest"
pip=("$dest/bin/pip" install --quiet --disable-pip-version-check)
"${pip[@]}" "torch==$torch" "triton==$triton" packaging regex numpy
"${pip[@]}" --no-deps "vllm==$version"
"${pip[@]}" --no-deps --editable "$here"
"$dest/bin/python" -c "import torch, triton; print('fit env', '$version', 'torch', torch.__version__, 'triton', triton.__version__)"
touch "$dest/.installed"
