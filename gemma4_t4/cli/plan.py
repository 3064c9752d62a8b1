"""`gemma4-t4 plan STACK`: the stack's real Pulumi program, run offline under Pulumi's mocks. In a
gemma4-t4 project the stack's config comes from its Pulumi.yaml and Pulumi.STACK.yaml; anywhere else,
for gce-t4 and sagemaker-t4, from the installed package's defaults."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from rich.table import Table
from rich.text import Text

from .. import clouds
from ..core import plan as offline
from ..core.changes import Change, changes
from ..core.plan_lines import cost_line, guard_lines, memory_line, revision_line
from ..errors import ConfigError
from .output import EXIT_OK, EXIT_USAGE, add_stack, busy, console, fail, print_json


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("plan", help="run a stack's Pulumi program offline, under mocks: resources, outputs, cost",
                       description=__doc__)
    add_stack(p, "gce-t4 or sagemaker-t4 (a Pulumi.STACK.yaml in the project)")
    add_config_options(p)
    p.add_argument("--json", action="store_true", help="print the plan as one JSON document")
    p.add_argument("--user-data", metavar="PATH", type=Path, help="also write the rendered cloud-config here (GCE)")
    p.set_defaults(run=run)


def add_config_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                   help="override one key as `pulumi config set` would; a dotted KEY (labels.team=ml) as `--path`")
    p.add_argument("--project-dir", type=Path, help="the Pulumi project (default: found from the working directory; "
                                                    "none: the package's own gce-t4 and sagemaker-t4)")


def load(args: argparse.Namespace) -> tuple[dict[str, Any], offline.Plan]:
    """The stack's config, as `pulumi up` would see it, and its offline plan. FileNotFoundError: no such stack."""
    with busy(f"running stack {args.stack}'s program offline"):
        return clouds.plan_stack(args.stack, args.config, args.project_dir)


def run(args: argparse.Namespace) -> int:
    try:
        _, result = load(args)
        changes = against_the_stack_file(args, result) if args.config else None
    except FileNotFoundError as err:
        return fail("plan", str(err), EXIT_USAGE)
    if args.user_data:
        text = clouds.plan_cloud(result).user_data(result)
        if text is None:
            raise ConfigError("cloud", f"stack {args.stack} renders no user-data (only a GCE stack has a guest)",
                              "leave out --user-data")
        args.user_data.write_text(text)
    if args.json:
        print_json({**result.as_json(), **({"changes": [asdict(c) for c in changes]} if changes is not None else {})})
    else:
        show(result)
        if changes is not None:
            show_changes(args, changes)
    return EXIT_OK


def against_the_stack_file(args: argparse.Namespace, result: offline.Plan) -> list[Change]:
    """What `pulumi up` would do to a stack deployed from its stack file as it stands, with --config's changes."""
    # Its program's own messages (a warning the shown plan already gave) are not shown twice.
    with busy("planning the stack file as it stands, to compare"), contextlib.redirect_stderr(io.StringIO()):
        _, before = clouds.plan_stack(args.stack, [], args.project_dir)
    return changes(before, result, clouds.plan_cloud(result).replaced_by)


def show_changes(args: argparse.Namespace, changes: list[Change]) -> None:
    console.print(f"[bold]against the stack file as it stands[/] (with {' '.join(args.config)}):")
    if not changes:
        console.print("  nothing changes", markup=False)
    for change in changes:
        console.print(f"  {change.line()}", markup=False)


# Inputs shown whole however long: the tags say whose a resource is (SageMaker's: the Pulumi organization,
# project and stack), which is what the plan is read for.
WHOLE = frozenset({"tags", "labels"})


def _short(value: Any, key: str = "") -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return text if len(text) <= 100 or key in WHOLE else f"<{len(text)} chars>"


def show(result: offline.Plan) -> None:
    console.print(f"[bold]stack {result.stack}[/]: {len(result.resources)} resources")
    for r in result.resources:
        parent = f"  [dim](in {r.parent})[/]" if r.parent else ""
        console.print(f"[green]+[/] {r.type}  [bold]{r.name}[/]{parent}")
        for key in sorted(r.inputs):
            console.print(f"      {key}: {_short(r.inputs[key], key)}", markup=False)
        kept = [k for k in ("protect", "retainOnDelete", "deleteBeforeReplace") if r.options.get(k)]
        if kept:
            console.print(f"      options: {', '.join(kept)}", markup=False)
    outputs = Table(title="outputs", title_justify="left", show_edge=False)
    outputs.add_column("output", no_wrap=True)
    outputs.add_column("value", overflow="fold")  # shown whole: connect_command is meant to be copied
    for key, value in sorted(result.outputs.items()):
        outputs.add_row(key, Text(value if isinstance(value, str) else json.dumps(value, sort_keys=True)))
    console.print(outputs)
    if (memory := memory_line(result)) is not None:
        console.print(memory, markup=False)
    if (revision := revision_line(result)) is not None:
        console.print(revision, markup=False)
    if (cost := cost_line(result, spot=clouds.plan_cloud(result).is_spot(result))) is not None:
        console.print(cost, markup=False)
    for item in clouds.extra_costs(result):
        console.print(f"  plus {item.name}: ${item.usd:,.2f}/{item.per} ({item.source})", markup=False)
    for line in guard_lines(result):
        console.print(line, markup=False)
