"""`gemma4-t4 start --stack gce-t4`: start a VM that `gemma4-t4 stop` stopped, and wait until it
runs. The guest comes back by itself (the provision unit re-checks every step at boot, then vLLM
starts): `gemma4-t4 wait --stack gce-t4` shows it become healthy. A VM already running is left as
it is.

SageMaker: an endpoint cannot be stopped, only deleted, so there is nothing to start: `pulumi up`
makes it again."""

from __future__ import annotations

import argparse

from .stop import act, add_vm_options


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("start", help="start a stopped GCE stack's VM (SageMaker: `pulumi up` instead)",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_vm_options(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    return act(args, "start")
