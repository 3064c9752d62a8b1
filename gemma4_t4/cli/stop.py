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
    """--stack, or the names a cloud gives its VM (Cloud.vm_names: --instance, --zone, --project on one)."""
    names, firsts = clouds.vm_names(), _firsts()
    where = p.add_argument_group(f"the VM (exactly one of {', '.join(['--stack', *(f'--{f}' for f in firsts)])})")
    choice = where.add_mutually_exclusive_group(required=True)
    choice.add_argument("-s", "--stack", help="a deployed GCE stack, e.g. gce-t4 (reads `pulumi stack output`)")
    for name, help_ in names.items():
        if name in firsts:
            others = " and ".join(f"--{other}" for other in list(firsts[name].vm_names)[1:])
            choice.add_argument(f"--{name}", dest=name, help=f"{help_} (with {others})" if others else help_)
        else:
            owners = " or ".join(f"--{first}" for first, cloud in firsts.items() if name in cloud.vm_names)
            where.add_argument(f"--{name}", dest=name, help=f"{help_} (only with {owners})")
    # A local Compute Engine stand-in for the tests; not for users.
    where.add_argument("--compute-endpoint", help=argparse.SUPPRESS)
    p.add_argument("--timeout", type=at_most(non_negative_float, limits.MAX_TIMEOUT_S), default=600, metavar="SECONDS",
                   help="give up waiting after this long (default 600)")
    p.add_argument("--interval", type=at_most(positive_float, limits.MAX_INTERVAL_S), default=5, metavar="SECONDS",
                   help="between two polls (default 5)")
    p.add_argument("--json", action="store_true", help="print the outcome as one JSON document")
    add_check(p, lambda args: _check(p, args))


def _firsts() -> dict[str, clouds.Cloud]:
    """{a VM's own name (the first of vm_names): its cloud}."""
    firsts: dict[str, clouds.Cloud] = {}
    for cloud in clouds.vm_clouds():
        firsts.setdefault(next(iter(cloud.vm_names)), cloud)
    return firsts


def _given(args: argparse.Namespace) -> dict[str, str]:
    return {name: value for name in clouds.vm_names() if (value := getattr(args, name, None))}


def _check(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    given = _given(args)
    for first, cloud in _firsts().items():
        others = list(cloud.vm_names)[1:]
        if args.stack and any(name in given for name in others):
            parser.error(f"{' and '.join(f'--{o}' for o in others)} go with --{first} (a stack knows its own)")
        if first in given and not set(cloud.vm_names) <= set(given):
            parser.error(f"--{first} needs {' and '.join(f'--{o}' for o in others)}")


def run(args: argparse.Namespace) -> int:
    return act(args, "stop")


def act(args: argparse.Namespace, action: Action) -> int:
    try:
        machine = (clouds.vm_from_stack(args.stack, api_endpoint=args.compute_endpoint) if args.stack else
                   clouds.named_vm(_given(args), args.compute_endpoint))
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
