"""`python -m turing_clamp check|fit`: verify the clamp where vLLM is installed."""

from __future__ import annotations

import importlib.metadata
import os
import sys

from . import contract, fit

ENTRY_POINT = "turing_clamp.plugin:register"


def check() -> int:
    """The clamp is registered, allowed, and matches the installed vLLM (no GPU needed)."""
    points = [ep for ep in importlib.metadata.entry_points(group="vllm.general_plugins") if ep.value == ENTRY_POINT]
    if not points:
        print("turing_clamp check: the vllm.general_plugins entry point is not installed "
              "(pip install the turing/ package into vLLM's environment)", file=sys.stderr)
        return 1
    allowed = os.environ.get("VLLM_PLUGINS")
    if allowed is not None and points[0].name not in allowed.split(","):
        print(f"turing_clamp check: VLLM_PLUGINS={allowed!r} excludes {points[0].name!r}: vLLM would not load "
              "the clamp", file=sys.stderr)
        return 1
    # vLLM keeps the real Triton module only where it sees no GPU it cannot use: with no device
    # visible, the kernels are inspected as compiled objects (this check needs no GPU).
    os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
    found = contract.problems(contract.load_module())
    if found:
        print(f"turing_clamp check: {contract.describe(found)}", file=sys.stderr)
        return 1
    print(f"turing_clamp check: OK: vLLM {contract.vllm_version()}, plugin {points[0].name!r} registered, "
          "launcher matches")
    return 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["check"] and len(argv) == 1:
        return check()
    if argv[:1] == ["fit"]:
        return fit.main(argv[1:])
    print("usage: python -m turing_clamp check | fit [--json] [--strict] [--cache-dir DIR]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
