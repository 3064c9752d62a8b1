"""`python -m gemma4_t4 COMMAND`: the operator's command line."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _plan(args: argparse.Namespace) -> int:
    from components.errors import ConfigError

    from . import plan as plan_mod

    try:
        config = plan_mod.load_stack_config(args.stack, args.config or [])
        result = plan_mod.run_program(args.stack, config)
    except (ConfigError, FileNotFoundError) as err:
        print(f"gemma4-t4 plan: refused: {err}", file=sys.stderr)
        return 1
    if args.user_data:
        text = plan_mod.user_data(result)
        if text is None:
            print(f"gemma4-t4 plan: stack {args.stack} renders no user-data", file=sys.stderr)
            return 1
        Path(args.user_data).write_text(text)
    print(json.dumps(result.as_json(), indent=2, sort_keys=True) if args.json else plan_mod.format_plan(result))
    return 0


def _fit(args: argparse.Namespace) -> int:
    sys.path.insert(0, str(REPO / "turing"))
    from turing_clamp import fit

    argv = (["--json"] if args.json else []) + (["--strict"] if args.strict else [])
    return fit.main(argv)


def main(argv: list[str] | None = None) -> int:
    sys.path.insert(0, str(REPO))
    parser = argparse.ArgumentParser(prog="gemma4-t4", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("plan", help="run the stack's Pulumi program offline, under mocks")
    p.add_argument("stack", help="gce-t4 or sagemaker-t4 (a Pulumi.STACK.yaml)")
    p.add_argument("--json", action="store_true", help="machine-readable: stack, resources, outputs, cost")
    p.add_argument("--config", action="append", metavar="KEY=VALUE",
                   help="override one key as `pulumi config set` would (dotted path = --path)")
    p.add_argument("--user-data", metavar="PATH", help="write the rendered cloud-config here")
    p.set_defaults(func=_plan)

    f = sub.add_parser("fit", help="compile every Gemma 4 attention kernel for sm_75 with the clamp (no GPU)")
    f.add_argument("--json", action="store_true")
    f.add_argument("--strict", action="store_true", help="also fail on any register spill")
    f.set_defaults(func=_fit)

    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
