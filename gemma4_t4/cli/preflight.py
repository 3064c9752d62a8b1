"""`gemma4-t4 preflight STACK`: can `pulumi up` work in this account? The live cloud's quotas and
GPU offerings for what the stack asks, each with the exact fix. With --all-regions: the same for
every region, and the `pulumi config set` lines that move the stack to the first that works.
Uses your cloud credentials."""

from __future__ import annotations

import argparse
from dataclasses import asdict

from rich.table import Table
from rich.text import Text

from .. import clouds
from ..core import capacity
from ..core import plan as offline
from .output import EXIT_FAILED, EXIT_OK, EXIT_USAGE, add_stack, busy, console, fail, print_json
from .plan import add_config_options, load


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("preflight", help="quotas and GPU offerings the stack needs, live, with the fix for each",
                       description=__doc__)
    add_stack(p)
    p.add_argument("--project", help="GCP project (default: gcp:project from the stack file)")
    p.add_argument("--all-regions", action="store_true",
                   help="every region: T4 quota, what is in use, (GCE) zones that sell a T4; names the first that "
                        "works and the `pulumi config set` lines that move the stack there")
    p.add_argument("--regions", metavar="R1,R2", type=lambda text: [r.strip() for r in text.split(",") if r.strip()],
                   help="with --all-regions on SageMaker: ask only these regions (default: every SageMaker region)")
    add_config_options(p)
    p.add_argument("--json", action="store_true", help="print the checks as one JSON document")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.regions and not args.all_regions:
        return fail("preflight", "--regions goes with --all-regions", EXIT_USAGE)
    # The stack's own program refuses a bad config first (exit 2), before any cloud is asked; what
    # it would create is what the checks ask the cloud for.
    try:
        config, result = load(args)
    except FileNotFoundError as err:
        return fail("preflight", str(err), EXIT_USAGE)
    place = clouds.Place(args.project, args.regions or ())
    if args.all_regions:
        return _all_regions(args, config, result, place)
    with busy("asking the cloud"):
        checks = clouds.preflight(args.stack, config, result, place)
    if args.json:
        print_json({"stack": args.stack, "ok": all(c.ok for c in checks), "checks": [asdict(c) for c in checks]})
    else:
        table = Table("", "check", "detail", "fix", show_edge=False, show_header=False)
        for c in checks:
            verdict = Text("WARN", "bold yellow") if c.warning else Text("OK", "green") if c.ok else \
                Text("FAIL", "bold red")
            table.add_row(verdict, Text(c.name), Text(c.detail), Text(c.fix))
        console.print(table)
    return EXIT_OK if all(c.ok for c in checks) else EXIT_FAILED


def _all_regions(args: argparse.Namespace, config: dict, result: offline.Plan, place: clouds.Place) -> int:
    cloud = clouds.plan_cloud(result)
    if args.regions and not cloud.supports(clouds.Feature.REGION_CHOICE):
        return fail("preflight", f"--regions on {cloud.name}: {cloud.unsupported[clouds.Feature.REGION_CHOICE]}",
                    EXIT_USAGE)
    needs = clouds.needs(result, config)
    with busy("asking every region"):
        report = clouds.regions(args.stack, config, result, place)
    if args.json:
        print_json({"stack": args.stack, **report.as_json()})
    else:
        _show(report, needs.region)
    return EXIT_OK if report.first is not None else EXIT_FAILED


def _show(report: capacity.RegionsReport, current: str) -> None:
    console.print(f"each region must hold {report.needed}")
    table = Table("", "region", "detail", show_edge=False, show_header=False)
    for row in report.rows:
        mark = Text("OK", "green") if row.ok else Text("no", "red")
        label = f"{row.region} (this stack)" if row.region == current else row.region
        table.add_row(mark, Text(label), Text(row.detail))
    console.print(table)
    for note in report.notes:
        console.print(f"note: {note}", markup=False)
    if report.first is None and all(row.limit is None for row in report.rows):
        console.print("no region could be asked: each row says why (fix that, then ask again)", markup=False)
    elif report.first is None:
        console.print("no region would work: request the quota shown above (the stack's region is listed first)",
                      markup=False)
    elif not report.config_lines:
        console.print(f"the stack's own {report.first.place or f'region {report.first.region}'} works: nothing to "
                      "move", markup=False)
    else:
        console.print(f"first that works: {report.first.where}; to move the stack there:", markup=False)
        for line in report.config_lines:
            console.print(f"  {line}", markup=False)
