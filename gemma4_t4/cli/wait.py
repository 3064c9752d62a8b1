"""`gemma4-t4 wait`: poll until the server is healthy, showing the elapsed time and what the cloud
says (VRAM on GCE tells a compiling engine from a dead one). If it dies or times out: the last log
lines, and exit 1."""

from __future__ import annotations

import argparse
from dataclasses import asdict

from ..core import ops
from . import target_options
from .output import EXIT_FAILED, EXIT_OK, console, err_console, non_negative_float, positive_float, print_json, ticker


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("wait", help="poll /health until healthy, with elapsed time and VRAM", description=__doc__)
    target_options.add(p)
    p.add_argument("--timeout", type=non_negative_float, default=1800, metavar="SECONDS",
                   help="give up after this long (default 1800: a VM's first boot is ~13 min of measured parts plus "
                        "the driver's DKMS build, its reboot and the model download; a cold service start alone "
                        "~8 min; see docs/gce-guest.md)")
    p.add_argument("--interval", type=positive_float, default=15, metavar="SECONDS",
                   help="between two polls (default 15)")
    p.add_argument("--json", action="store_true", help="print the outcome as one JSON document")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    with target_options.opened(args) as target, ticker(f"waiting for {target.label}") as tick:
        result = ops.wait(target, timeout_s=args.timeout, interval_s=args.interval, on_tick=tick)
    if args.json:
        print_json(asdict(result))
    elif result.healthy:
        console.print(f"healthy after {result.elapsed_s:.0f}s: {result.target}", markup=False)
    else:
        err_console.print(ops.wait_failure(result, args.timeout), markup=False)
    return EXIT_OK if result.healthy else EXIT_FAILED
