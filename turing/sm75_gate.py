"""The image's last gate: the torch the entrypoint runs must carry sm_75 (Turing) kernels.

There is no GPU at build time, so it reads the architectures torch was compiled for
(torch._C._cuda_getArchFlags(), e.g. "sm_75 sm_80 ... sm_120"). A CPU build of torch has no such
list: the gate cannot tell, and says so. With --allow-cpu-torch (the stand-in base only) that is
reported and passed; otherwise it fails the build like a missing sm_75.
"""

from __future__ import annotations

import argparse
import sys

REQUIRED = "sm_75"


def verdict(torch, allow_cpu_torch: bool) -> tuple[bool, str]:
    if getattr(torch.version, "cuda", None) is None:
        message = (f"sm75 gate: NOT CHECKED: torch {torch.__version__} is a CPU build, which has no CUDA "
                   f"architectures to read; only a CUDA torch can show {REQUIRED}")
        return allow_cpu_torch, message + (" (allowed: --allow-cpu-torch)" if allow_cpu_torch else "")
    flags = torch._C._cuda_getArchFlags().split()
    if REQUIRED in flags:
        return True, f"sm75 gate: torch {torch.__version__} (CUDA {torch.version.cuda}) arch: {' '.join(flags)}"
    return False, (f"sm75 gate: torch {torch.__version__} (CUDA {torch.version.cuda}) has no {REQUIRED} kernels "
                   f"(arch: {' '.join(flags) or 'none'}): it cannot run on a Tesla T4")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--allow-cpu-torch", action="store_true",
                        help="pass (with a notice) when torch is a CPU build: only for a stand-in base")
    args = parser.parse_args(argv)
    import torch

    ok, message = verdict(torch, args.allow_cpu_torch)
    print(message, file=sys.stdout if ok else sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
