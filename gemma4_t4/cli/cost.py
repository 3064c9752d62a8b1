"""`gemma4-t4 cost STACK`: what the stack costs at catalog list prices, from its offline plan: per
hour while it serves, per month while its VM is stopped (`gemma4-t4 stop`), per month after
`pulumi destroy`. A SageMaker endpoint has no stopped state: it can only be deleted."""

from __future__ import annotations

import argparse
from dataclasses import asdict

from rich.table import Table

from .. import clouds
from ..core.cost import CostEstimate
from .output import EXIT_OK, EXIT_USAGE, add_stack, busy, console, fail, print_json
from .plan import add_config_options


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("cost", help="$/h while serving, $/month stopped and after destroy (catalog prices)",
                       description=__doc__)
    add_stack(p)
    add_config_options(p)
    p.add_argument("--json", action="store_true", help="print the estimate as one JSON document")
    p.set_defaults(run=run)


# The stack each registered cloud ships, in the registry's order: a column each.
README_STACKS = tuple(cloud.stack for cloud in clouds.CLOUDS.values())


def readme_table(stacks: tuple[str, ...] = README_STACKS) -> str:
    """The README's cost table, from the same estimate `gemma4-t4 cost` prints (tests/cli/test_docs.py
    holds the README equal to it): `python -c 'from gemma4_t4.cli.cost import readme_table as t; print(t())'`."""
    estimates = [clouds.estimate(stack) for stack in stacks]
    lines = ["| at catalog list prices, default region | " + " | ".join(f"`{e.stack}`" for e in estimates) + " |",
             "|---|" + "---|" * len(estimates),
             "| serving, per hour | " + " | ".join(_usd(e.running_usd_per_hour, "h") for e in estimates) + " |",
             "| stopped (`gemma4-t4 stop -s STACK`), per month | " + " | ".join(
                 _usd(e.stopped_usd_per_month, "month") if e.stoppable else "cannot stop, only delete"
                 for e in estimates) + " |",
             "| after `pulumi destroy`, per month | " + " | ".join(
                 _usd(e.after_destroy_usd_per_month, "month") for e in estimates) + " |"]
    return "\n".join(lines)


def _usd(value: float | None, unit: str) -> str:
    return "-" if value is None else f"${value:,.4f}/{unit}" if unit == "h" else f"${value:,.2f}/{unit}"


def _serving(result: CostEstimate) -> str:
    """Per hour while serving; an autoscaled endpoint's range as `plan` shows it; where a part has no catalog price,
    the floor the priced parts come to, and what it leaves out."""
    if result.running_usd_per_hour is None and result.running_usd_per_hour_at_least is not None:
        missing = ", ".join(dict.fromkeys(_part(item) for item in result.unpriced)) or "some parts"
        return f"≥ {_usd(result.running_usd_per_hour_at_least, 'h')} + {missing}, price unknown"
    span = result.running_usd_per_hour_range
    if span is None or span[0] == span[1]:
        return _usd(result.running_usd_per_hour, "h")
    return f"{_usd(span[0], 'h')} to {_usd(span[1], 'h')}, fewest to most instances"


def _part(item: str) -> str:
    """A catalog item as the table names it: disk:pd-ssd:gb-month in europe-west4 is a disk."""
    return {"disk": "disks", "machine": "machine", "gpu": "GPUs"}.get(item.split(":", 1)[0], item)


def run(args: argparse.Namespace) -> int:
    try:
        with busy(f"running stack {args.stack}'s program offline"):
            result = clouds.estimate(args.stack, args.config, args.project_dir)
    except FileNotFoundError as err:
        return fail("cost", str(err), EXIT_USAGE)
    if args.json:
        print_json(asdict(result))
        return EXIT_OK
    table = Table("", "USD", title=f"stack {result.stack} ({result.cloud})", title_justify="left")
    table.add_row("serving", _serving(result))
    table.add_row("stopped", _usd(result.stopped_usd_per_month, "month") if result.stoppable else "cannot stop")
    table.add_row("after pulumi destroy", _usd(result.after_destroy_usd_per_month, "month"))
    for item in result.extras:
        table.add_row(item.name, _usd(item.usd, item.per))
    console.print(table)
    for disk in result.disks:
        console.print(f"  {disk.name}: {disk.type} {disk.size_gb} GB, {_usd(disk.usd_per_month, 'month')}",
                      markup=False)
    stopped = (result.stopped_usd_per_month,) if result.stoppable else ()
    if None in (result.running_usd_per_hour, result.after_destroy_usd_per_month, *stopped) \
            or any(d.usd_per_month is None for d in result.disks):
        console.print("-: the catalog has no list price here: unknown, not free"
                      + (" (the disks still bill)" if result.disks else ""), markup=False)
    if result.running_usd_per_hour is None and result.running_usd_per_hour_at_least is not None:
        console.print(f"≥: at least what the catalog prices, {result.at_least_covers}; no list price for "
                      f"{', '.join(result.unpriced)}", markup=False)
    for note in result.notes:
        console.print(note, markup=False)
    return EXIT_OK
