"""`gemma4-t4 down [STACK]`: `pulumi destroy` through Pulumi's Automation API (your Pulumi CLI and backend), each
resource as it goes, then what still bills: on GCE the kept data disk (its size and $/month), which only
--delete-data deletes (it holds the model and the vLLM environment the next `up` adopts). The stack stays in the
backend, empty, for the next `up`. Ctrl-C leaves a stack that `down` or `up` picks up."""

from __future__ import annotations

import argparse

from .. import clouds
from ..core.deploy import DeployError, Deployment
from . import stack_run
from .output import EXIT_INTERRUPTED, EXIT_OK, console, err_console


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("down", help="destroy a stack, then say what still bills (GCE: the kept data disk)",
                       description=__doc__)
    stack_run.add_common(p)
    p.add_argument("--delete-data", action="store_true",
                   help="also delete the kept data disk (GCE: the model and the vLLM environment, re-downloaded "
                        "by the next `up`)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    deployment = Deployment(args.stack, stack_run.project_dir(args))
    if not deployment.exists():
        raise DeployError(f"there is no stack {args.stack} in your Pulumi backend: nothing to destroy")
    outputs = deployment.outputs()
    if outputs:
        cloud = clouds.CLOUDS.get(str(outputs.get("cloud")), clouds.CLOUDS[clouds.DEFAULT_CLOUD])
        console.print(f"stack {args.stack} ({cloud.name}): destroys every resource it made"
                      + (" and then the kept data" if args.delete_data else ""), markup=False)
        stack_run.confirm(args, "destroy")
    attempt = deployment.destroy(stack_run.progress)
    if attempt.interrupted:
        err_console.print(f"interrupted: stack {args.stack} is saved as far as it got; `gemma4-t4 down {args.stack}` "
                          "again finishes it", markup=False)
        return EXIT_INTERRUPTED
    if not attempt.ok:
        stack_run.failed(args.stack, attempt, "destroy")
    console.print(f"destroyed stack {args.stack}", markup=False)
    if outputs:
        cloud = clouds.CLOUDS.get(str(outputs.get("cloud")), clouds.CLOUDS[clouds.DEFAULT_CLOUD])
        for line in cloud.after_down(outputs, args.delete_data, args.compute_endpoint):
            console.print(line, markup=False)
    return EXIT_OK
