"""`gemma4-t4 status`: is the server serving, which model at what length, and what the cloud says
of it (VRAM on GCE, the endpoint status on SageMaker). Exit 1 if it is not serving."""

from __future__ import annotations

import argparse
from dataclasses import asdict

from rich.table import Table
from rich.text import Text

from ..core import ops
from . import target_options
from .output import EXIT_FAILED, EXIT_OK, console, print_json


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("status", help="serving or not, model and max length, VRAM (GCE) or endpoint status",
                       description=__doc__)
    target_options.add(p)
    p.add_argument("--json", action="store_true", help="print the status as one JSON document")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    with target_options.opened(args) as target:
        result = ops.status(target)
    if args.json:
        print_json(asdict(result))
    else:
        verdict = Text("serving", "bold green") if result.serving else Text("NOT serving", "bold red")
        console.print(Text.assemble(Text(result.target), ": ", verdict, f" ({result.reason})" if result.reason else ""))
        table = Table(show_header=False, show_edge=False, box=None, padding=(0, 2))
        for key, value in result.details.items():
            table.add_row(Text(key), Text("\n".join(value) if isinstance(value, list) else str(value)))
        for model in result.models:
            table.add_row("model", Text(f"{model['id']}  max_model_len: {model['max_model_len']}"))
        console.print(table)
    return EXIT_OK if result.serving else EXIT_FAILED
