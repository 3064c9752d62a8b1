"""`gemma4-t4 logs`: the vLLM service's journal on the GCE VM, or the endpoint's CloudWatch log on
SageMaker. --follow keeps printing until interrupted."""

from __future__ import annotations

import argparse

from . import target_options
from .output import EXIT_OK, console, positive_int


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("logs", help="the service journal (GCE) or the endpoint's CloudWatch log (SageMaker)",
                       description=__doc__)
    target_options.add(p)
    p.add_argument("--follow", action="store_true", help="keep printing new lines until Ctrl-C")
    p.add_argument("--lines", type=positive_int, default=200, help="how many recent lines (default 200)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    # A URL has no log (core.targets.NO_LOG_AT_A_URL): without the Pulumi CLI, only an endpoint is left.
    with target_options.opened(args, instead="--endpoint NAME --region REGION") as target:
        for line in target.log_lines(args.follow, args.lines):
            console.out(line, highlight=False)
    return EXIT_OK
