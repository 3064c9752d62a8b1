"""The one entry of the components' local steps: `python -m gemma4_t4.step NAME` runs step NAME
(gemma4_t4.components.step.STEPS). Every stack's state records this module's name in its steps' `create`
(components/step.py, STEP_LINE), so it stays here whatever else moves; what it runs is looked up when it runs."""

from __future__ import annotations

import sys

from gemma4_t4.components.step import run_named


def main(argv: list[str] | None = None) -> int:
    return run_named(sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    sys.exit(main())
