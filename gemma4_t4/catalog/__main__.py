"""`python -m gemma4_t4.catalog get KEY | clamp-matrix | vllm-cpu-matrix | json`: the catalog for shell and Make."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict

from . import CLAMP_VERIFIED_VLLM, PINS, TESLA_T4, VLLM_CPU_FOR_GCE


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "get" and argv[1] in PINS:
        print(PINS[argv[1]])
        return 0
    if argv == ["clamp-matrix"]:
        print(" ".join(f"{v}:{t}" for v, t in CLAMP_VERIFIED_VLLM.items()))
        return 0
    if argv == ["vllm-cpu-matrix"]:  # GCE_VLLM_VERSION:VLLM_CPU_VERSION, one per selectable GCE vLLM
        print(" ".join(f"{v}:{cpu}" for v, cpu in VLLM_CPU_FOR_GCE.items()))
        return 0
    if argv == ["json"]:
        print(json.dumps({"pins": PINS, "t4": asdict(TESLA_T4)}, indent=2))
        return 0
    print("usage: python -m gemma4_t4.catalog get KEY | clamp-matrix | vllm-cpu-matrix | json", file=sys.stderr)
    print("keys: " + ", ".join(sorted(PINS)), file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
