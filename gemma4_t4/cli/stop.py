"""`gemma4-t4 stop --stack gce-t4`: stop the VM without destroying it, and wait until it has
stopped. Both disks stay (and bill, at catalog list prices: printed); the machine and the GPU stop
billing. `gemma4-t4 start` brings it back. A VM already stopped is left as it is.

SageMaker: an endpoint cannot be stopped, only deleted (`pulumi destroy`, or the stack's
endpointTtl); `pulumi up` makes it again."""

from __future__ import annotations

import argparse
from dataclasses import asdict

from rich.table import Table

from .. import clouds
from ..core import limits
from ..core.lifecycle import Action, LifecycleResult, NotStoppable
from .output import (
    EXIT_OK,
    EXIT_USAGE,
    add_check,
    at_most,
    console,
    fail,
    non_negative_float,
    positive_float,
    print_json,
    ticker,
)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("stop", help="stop a GCE stack's VM, keeping its disks (SageMaker: cannot stop, only delete)",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_vm_options(p)
    p.set_defaults(run=run)


def add_vm_options(p: argparse.ArgumentParser) -> None:
    where = p.add_argument_group("the VM (exactly one of --stack, --instance)")
    choice = where.add_mutually_exclusive_group(required=True)
    choice.add_argument("-s", "--stack", help="a deployed GCE stack, e.g. gce-t4 (reads `pulumi stack output`)")
    choice.add_argument("--instance", help="the VM's name (with --zone and --project)")
    where.add_argument("--zone", help="the VM's zone (only with --instance)")
    where.add_argument("--project", help="the VM's GCP project (only with --instance)")
    # A local Compute Engine stand-in for the tests; not for users.
    where.add_argument("--compute-endpoint", help=argparse.SUPPRESS)
    p.add_argument("--timeout", type=at_most(non_negative_float, limits.MAX_TIMEOUT_S), default=600, metavar="SECONDS",
                   help="give up waiting after this long (default 600)")
    p.add_argument("--interval", type=at_most(positive_float, limits.MAX_INTERVAL_S), default=5, metavar="SECONDS",
                   help="between two polls (default 5)")
    p.add_argument("--json", action="store_true", help="print the outcome as one JSON document")
    add_check(p, lambda args: _check(p, args))


def _check(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if args.instance and not (args.zone and args.project):
        parser.error("--instance needs --zone and --project")
    if args.stack and (args.zone or args.project):
        parser.error("--zone and --project go with --instance (a stack knows its own)")


def run(args: argparse.Namespace) -> int:
    return act(args, "stop")


def act(args: argparse.Namespace, action: Action) -> int:
    try:
        machine = (clouds.vm_from_stack(args.stack, api_endpoint=args.compute_endpoint) if args.stack else
                   clouds.named_vm({"instance": args.instance, "zone": args.zone, "project": args.project},
                                   args.compute_endpoint))
    except NotStoppable as err:
        return fail(action, str(err), EXIT_USAGE)
    with ticker(f"{action} {machine}") as tick:
        result = machine.act(action, timeout_s=args.timeout, interval_s=args.interval, on_tick=tick)
    if args.json:
        print_json(asdict(result))
    else:
        show(result)
    return EXIT_OK


def show(result: LifecycleResult) -> None:
    verb = "stopped" if result.action == "stop" else "running"
    change = f"{result.status_before} -> {result.status_after}" if result.changed else result.status_after
    console.print(f"{verb}: {result.vm}  {change}  ({result.elapsed_s:.0f}s)", markup=False)
    title = "still billing while stopped" if result.action == "stop" else "the disks (bill whether it runs or not)"
    table = Table("disk", "type", "GB", "USD/month", title=title, title_justify="left")
    for disk in result.disks:
        table.add_row(disk.name, disk.type, str(disk.size_gb),
                      "-" if disk.usd_per_month is None else f"{disk.usd_per_month:,.2f}")
    table.add_row("total", "", "", "-" if result.stopped_usd_per_month is None else
                  f"{result.stopped_usd_per_month:,.2f}", end_section=True)
    console.print(table)
    for note in result.notes:
        console.print(note, markup=False)
