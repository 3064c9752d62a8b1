"""`gemma4-t4 fit`: compile every Gemma 4 attention kernel the clamp launches for sm_75 (no GPU)
and report shared memory, registers and spills, in each of the project's fit environments
(`make fit-env` in a clone: one per pinned vLLM), or here if vLLM imports here."""

from __future__ import annotations

import argparse
from pathlib import Path

from turing_clamp import fit as clamp_fit

from ..core import fit
from .output import EXIT_FAILED, EXIT_OK, busy, console, print_json


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("fit", help="compile every Gemma 4 attention kernel for sm_75 with the clamp (no GPU)",
                       description=__doc__)
    p.add_argument("--json", action="store_true", help="print the reports as one JSON document")
    p.add_argument("--strict", action="store_true", help="also fail on any register spill")
    p.add_argument("--project-dir", type=Path, help="the project whose .fit/ environments to use "
                                                    "(default: found from the working directory)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    with busy("compiling the clamp's kernels for sm_75"):
        reports = fit.run(args.strict, args.project_dir)
    if args.json:
        print_json(reports)
    else:
        for report in reports:
            console.print(clamp_fit.format_report(report), markup=False, highlight=False)
            console.print()
    return EXIT_OK if all(fit.ok(r, args.strict) for r in reports) else EXIT_FAILED
