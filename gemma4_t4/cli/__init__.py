"""gemma4-t4: plan, check, query and benchmark Gemma 4 on a Tesla T4 (GCE or SageMaker).

Exit codes: 0 ok; 1 failed (not serving, a check failed, the target refused or is unreachable);
2 bad usage or a refused stack config; 130 interrupted.
"""

from __future__ import annotations

import argparse
import sys

from .. import __version__
from ..core.targets import TargetError
from ..errors import ConfigError
from . import bench, cost, fit, logs, mcp, plan, preflight, query, start, status, stop, wait
from .output import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_USAGE, err_console, fail

COMMANDS = (plan, preflight, cost, fit, status, wait, query, logs, bench, stop, start, mcp)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gemma4-t4", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)  # bad usage: argparse prints it and exits 2
    if hasattr(args, "check_usage"):
        args.check_usage(args)  # rules argparse cannot say, e.g. --region only with --endpoint
    try:
        return args.run(args)
    except KeyboardInterrupt:
        err_console.print("interrupted")
        return EXIT_INTERRUPTED
    except ConfigError as err:
        return fail(args.command, f"refused: {err}", EXIT_USAGE)
    except TargetError as err:
        return fail(args.command, str(err), EXIT_FAILED)


if __name__ == "__main__":
    sys.exit(main())
