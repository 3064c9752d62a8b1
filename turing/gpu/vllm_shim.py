"""A minimal `vllm` package around vLLM's real Triton attention files, for a GPU machine that
cannot install vLLM (no network, no room for the wheel). The kernels and the launcher are the
release's own files, unmodified; only the five tiny modules they import are stood in for.

Built here by `make device-bundle` (``python vllm_shim.py --release-dir DIR --version V --out
SHIM``); the GPU machine then runs numerics.py with SHIM on PYTHONPATH.
"""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

ATTENTION_FILES = ("triton_unified_attention.py", "triton_attention_helpers.py")

STUBS = {
    "vllm/__init__.py": "",
    "vllm/envs.py": "VLLM_BATCH_INVARIANT = False\n",
    "vllm/logger.py": "import logging\n\ndef init_logger(name):\n    return logging.getLogger(name)\n",
    "vllm/triton_utils/__init__.py": "import triton\nimport triton.language as tl\n",
    "vllm/platforms/__init__.py": '''import torch


class _CudaPlatform:
    def is_cuda(self):
        return True

    def is_rocm(self):
        return False

    def fp8_dtype(self):
        return torch.float8_e4m3fn

    def get_device_capability(self, device_id=0):
        return torch.cuda.get_device_capability(device_id)

    def is_device_capability_family(self, family, device_id=0):
        major, minor = torch.cuda.get_device_capability(device_id)
        return (major * 10 + minor) // 10 == family // 10


current_platform = _CudaPlatform()
''',
    "vllm/v1/__init__.py": "",
    "vllm/v1/attention/__init__.py": "",
    "vllm/v1/attention/ops/__init__.py": "",
}


def _kv_quant_mode_source(kv_cache_interface: Path) -> str:
    """Only the KVQuantMode enum from vLLM's kv_cache_interface.py (the rest pulls in vLLM)."""
    tree = ast.parse(kv_cache_interface.read_text())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "KVQuantMode")
    return "from enum import IntEnum\n\n\n" + ast.get_source_segment(kv_cache_interface.read_text(), cls) + "\n"


def build(release_dir: Path, root: Path, version: str) -> Path:
    """Lay out the shim under ``root`` from the files in ``release_dir``: the directory to put on
    PYTHONPATH."""
    for rel, text in STUBS.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    ops = root / "vllm/v1/attention/ops"
    for name in ATTENTION_FILES:
        (ops / name).write_text((release_dir / name).read_text())
    (root / "vllm/v1/kv_cache_interface.py").write_text(_kv_quant_mode_source(release_dir / "kv_cache_interface.py"))
    dist = root / f"vllm-{version}.dist-info"
    dist.mkdir(exist_ok=True)
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n")
    return root


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--release-dir", type=Path, required=True, help="the release's three vLLM files")
    parser.add_argument("--version", required=True, help="the vLLM version they come from")
    parser.add_argument("--out", type=Path, required=True, help="where to lay out the shim")
    args = parser.parse_args()
    print(build(args.release_dir, args.out, args.version))
