"""`gemma4-t4 up [STACK]`: from nothing to a first answer. Makes the stack if the backend lacks it (the cloud from
the stack's name or --cloud; gcloud's project or AWS's region where you have one configured), writes every value it
chooses into the stack file (a later plain `pulumi up` does the same), picks a new GCE stack's zone (the cheapest
that sells the T4 where the project has quota; --zone or a zone in the stack file wins), shows what it will make,
what it costs and what still bills after `down`, and asks before it spends (--yes for scripts). Then `pulumi up`
through Pulumi's Automation API (your Pulumi CLI and backend), each resource as it is made; on GCE, a zone out of
T4s or a region out of quota moves the stack to the next zone by itself (its empty data disk deleted first), at
most --moves times. Last, the first boot's phases until the server answers, and how to query and stop it.
Ctrl-C leaves a stack that `up` or `down` picks up."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from rich.prompt import Confirm

from .. import clouds
from ..core import plan as offline
from ..core.deploy import Attempt, Deployment
from ..errors import PROJECT, UsageError
from . import stack_run
from .output import EXIT_INTERRUPTED, console, err_console, fail, non_negative_int


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("up", help="make or update a stack, with zone failover on GCE, then wait for its first answer",
                       description=__doc__)
    stack_run.add_common(p)
    p.add_argument("--cloud", choices=list(clouds.CLOUDS),
                   help="the cloud of a new stack whose name does not say it (gce-t4 and sagemaker-t4 do)")
    p.add_argument("--project", help="GCE: the GCP project (default: the stack file's gcp:project, else gcloud's)")
    p.add_argument("--zone", help="GCE: this zone, not the cheapest (a zone in the stack file wins too)")
    p.add_argument("--spot", action="store_true", help="GCE: a Spot VM (cheaper, may be preempted: then stopped)")
    p.add_argument("--moves", type=non_negative_int, default=clouds.FAILOVER_MOVES, metavar="N",
                   help=f"GCE: other zones to try after a stock-out or a quota refusal (default "
                        f"{clouds.FAILOVER_MOVES}; 0: none)")
    p.add_argument("--no-wait", action="store_true", help="end when Pulumi is done, without waiting for the server")
    p.set_defaults(run=run)


def _chosen(args: argparse.Namespace, in_file: dict[str, Any]) -> dict[str, str]:
    """The values `up` writes into the stack file: what the user's flags say, a stack without a file of its own gets
    its cloud's shipped settings, and the provider's keys come from the user's cloud CLI configuration."""
    cloud = clouds.CLOUDS[args.cloud] if args.cloud else clouds.cloud_of_stack(args.stack)
    named = str(in_file.get(f"{PROJECT}:cloud") or "")
    if cloud is not None and named and named != cloud.name and args.cloud:
        raise UsageError(f"stack {args.stack} is a {named} stack (its {PROJECT}:cloud): leave out --cloud {args.cloud}",
                         prog="gemma4-t4 up")
    chosen = cloud or clouds.CLOUDS[named or clouds.DEFAULT_CLOUD]
    values: dict[str, str] = {}
    if not in_file:  # no stack file yet: the cloud's own settings, as its shipped stack file has them
        values.update({key: str(value) for key, value in chosen.preset.items() if key.startswith(f"{PROJECT}:")})
    if not named and chosen.name != clouds.DEFAULT_CLOUD:
        values[f"{PROJECT}:cloud"] = chosen.name
    if args.project:
        values["gcp:project"] = args.project
    if args.zone:
        values[f"{PROJECT}:zone"] = args.zone
    if args.spot:
        values[f"{PROJECT}:spot"] = "true"
    provider = chosen.user_config({**in_file, **values})
    if not in_file and not provider:  # no configuration of the user's: the shipped stack file's (aws:region)
        provider = {key: str(value) for key, value in chosen.preset.items() if not key.startswith(f"{PROJECT}:")}
    return {**values, **provider}


def run(args: argparse.Namespace) -> int:
    work_dir = stack_run.project_dir(args)
    deployment = Deployment(args.stack, work_dir)
    new = not deployment.exists()
    in_file = stack_run.stack_file_config(work_dir, args.stack)
    values = _chosen(args, in_file)
    config, plan = stack_run.plan(args.stack, work_dir, values)
    cloud = clouds.plan_cloud(plan)
    choose = new and cloud.supports(clouds.Feature.ZONE_FAILOVER) and f"{PROJECT}:zone" not in {**in_file, **values}
    placement = stack_run.place(cloud, plan, config, choose, args.compute_endpoint)
    if placement.config:
        values.update(placement.config)
        config, plan = stack_run.plan(args.stack, work_dir, values)
    for line in placement.lines:
        err_console.print(line, markup=False)
    _summary(args, plan, new, values)
    if not args.spot and cloud.spot_offer(config) and str(config.get(f"{PROJECT}:spot")).lower() != "true":
        offer = cloud.spot_offer(config).replace("STACK", args.stack)
        console.print(offer, markup=False)
        if not args.yes and sys.stdin.isatty() and Confirm.ask("take Spot instead?", default=False):
            values[f"{PROJECT}:spot"] = "true"
            config, plan = stack_run.plan(args.stack, work_dir, values)
    stack_run.confirm(args, "deploy")
    if new:
        deployment.create()
        err_console.print(f"made stack {args.stack} in your Pulumi backend", markup=False)
    attempt = _deploy(args, deployment, cloud, values, config, placement)
    if attempt.interrupted:
        err_console.print(f"interrupted: stack {args.stack} is saved as far as it got; `gemma4-t4 up {args.stack}` "
                          f"goes on, `gemma4-t4 down {args.stack}` removes it", markup=False)
        return EXIT_INTERRUPTED
    return stack_run.finish(args, deployment.outputs(), plan)


def _summary(args: argparse.Namespace, plan: offline.Plan, new: bool, values: dict[str, str]) -> None:
    console.print(f"{'a new' if new else 'the'} stack {args.stack}:", markup=False)
    stack_run.brief(plan)
    for key, value in values.items():
        console.print(f"  sets {key} {value} in Pulumi.{args.stack}.yaml", markup=False)


def _deploy(args: argparse.Namespace, deployment: Deployment, cloud: clouds.Cloud, values: dict[str, str],
            config: dict[str, Any], placement: clouds.Placement) -> Attempt:
    """`pulumi up`, again in the next zone after each refusal a move may cure, at most --moves times."""
    deployment.set_config(values)
    tried = [str(config.get(f"{PROJECT}:zone", ""))]
    while True:
        attempt = deployment.up(stack_run.progress)
        if attempt.ok or attempt.interrupted:
            return attempt
        move = cloud.recover(attempt, config, placement, tried, args.compute_endpoint)
        if move is None:
            stack_run.failed(args.stack, attempt, "up")
        for line in move.lines:
            err_console.print(line, markup=False)
        if move.stop:
            fail("up", f"stack {args.stack}: {move.stop}")
        if len(tried) - 1 >= args.moves:
            fail("up", f"stack {args.stack}: tried {len(tried)} zones ({', '.join(tried)}), the most --moves allows; "
                       f"`gemma4-t4 up {args.stack} --moves N` tries more")
        tried.append(move.zone)
        config = {**config, f"{PROJECT}:zone": move.zone}
        deployment.set_config({f"{PROJECT}:zone": move.zone})
