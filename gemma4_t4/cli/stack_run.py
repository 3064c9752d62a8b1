"""What `up` and `down` share: the stack and its project, the offline plan of what `pulumi up` will do, the
question before spending, the engine's progress lines, Pulumi's own diagnostics on failure, and the last lines."""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path
from typing import Any, NoReturn

from rich.prompt import Confirm

from .. import clouds
from ..core import ops
from ..core import plan as offline
from ..core.deploy import Attempt
from ..core.plan_lines import cost_line, cost_range, guard_lines
from ..core.stack_files import apply_override, find_project, read_yaml
from ..core.targets import TargetError
from ..errors import PROJECT, UsageError
from . import wait as wait_view
from .output import EXIT_FAILED, EXIT_OK, add_check, add_stack, busy, console, err_console, fail


def add_common(p: argparse.ArgumentParser) -> None:
    def default_stack(args: argparse.Namespace) -> None:
        if not args.stack and not args.stack_positional:
            cloud = getattr(args, "cloud", None)
            args.stack_positional = clouds.CLOUDS[cloud].stack if cloud else clouds.CLOUDS[clouds.DEFAULT_CLOUD].stack

    add_check(p, default_stack)
    add_stack(p, "the stack, e.g. gce-t4 or sagemaker-t4 (default: the --cloud's, else gce-t4)")
    p.add_argument("-y", "--yes", action="store_true", help="do not ask (for scripts); without it and without a "
                                                          "terminal, nothing is done")
    p.add_argument("--project-dir", type=Path, help="the Pulumi project (default: found from the working directory)")
    # A local Compute Engine stand-in for the tests; not for users.
    p.add_argument("--compute-endpoint", help=argparse.SUPPRESS)


def project_dir(args: argparse.Namespace) -> Path:
    try:
        return find_project(args.project_dir)
    except FileNotFoundError as err:
        fail(args.command, str(err), 2)


def stack_file_config(work_dir: Path, stack: str) -> dict[str, Any]:
    """What Pulumi.STACK.yaml itself sets (fully qualified), {} where there is no such file."""
    path = work_dir / f"Pulumi.{stack}.yaml"
    found = read_yaml(path).get("config") or {} if path.is_file() else {}
    return {key if ":" in key else f"{PROJECT}:{key}": value for key, value in found.items()}


def defaults(work_dir: Path) -> dict[str, Any]:
    project = read_yaml(work_dir / "Pulumi.yaml").get("config") or {}
    return {f"{PROJECT}:{key}": spec["default"] for key, spec in project.items()
            if isinstance(spec, dict) and "default" in spec}


def plan(stack: str, work_dir: Path, values: dict[str, str]) -> tuple[dict[str, Any], offline.Plan]:
    """The stack's config as `pulumi up` will see it with VALUES written, and its offline plan: a config the
    program refuses is refused here, before anything is made."""
    overrides = [f"{key}={value}" for key, value in values.items()]
    with busy(f"running stack {stack}'s program offline"):
        if (work_dir / f"Pulumi.{stack}.yaml").is_file():
            config = clouds.stack_config(stack, overrides, work_dir)
        else:
            config = defaults(work_dir)
            for override in overrides:
                apply_override(config, override)
        return config, clouds.offline_plan(stack, config)


def place(cloud: clouds.Cloud, result: offline.Plan, config: dict[str, Any], choose: bool,
          endpoint: str | None) -> clouds.Placement:
    if not cloud.supports(clouds.Feature.ZONE_FAILOVER):
        with busy("checking the account"):
            checks = clouds.preflight(result.stack, config, result)
        for check in checks:
            err_console.print(f"{'OK' if check.ok else 'FAIL'}  {check.name}: {check.detail}", markup=False)
        if not all(c.ok for c in checks):
            bad = next(c for c in checks if not c.ok)
            fail("up", f"stack {result.stack}: {bad.name}: {bad.detail}; {bad.fix} (nothing was made)")
        return clouds.Placement({}, [])
    try:
        with busy("asking where T4s are and where the project has quota"):
            return cloud.place(config, clouds.needs(result, config), choose, endpoint)
    except TargetError as err:
        if choose:
            raise
        # The stack's zone is set: `pulumi up` may still work there; only the failover lacks its map.
        return clouds.Placement({}, [f"could not ask where T4s are ({err}): no zone failover this time"])


def brief(result: offline.Plan) -> None:
    """What `pulumi up` makes, its price per hour and per day, the guards, what bills after `down`."""
    kinds = Counter(r.type.rsplit(":", 1)[-1] for r in result.resources if r.custom)
    console.print("  makes: " + ", ".join(f"{n} {kind}" if n > 1 else kind for kind, n in sorted(kinds.items())),
                  markup=False)
    span, spot = cost_range(result), clouds.plan_cloud(result).is_spot(result)
    if span is not None:
        console.print(f"  costs: ${span[0]:.4f}/h, ${span[0] * 24:.2f}/day while it serves "
                      f"({'Spot ' if spot else ''}list prices; the bill is the truth)", markup=False)
    elif (line := cost_line(result, spot=spot)) is not None:
        console.print(f"  {line}", markup=False)
    for line in guard_lines(result):
        console.print(f"  {line}", markup=False)
    after = result.outputs.get("billing_after_destroy_usd_per_month")
    console.print("  after `gemma4-t4 down`: " + ("nothing bills" if not after else
                  f"${after:,.2f}/month ({_after_what(result)}; `down --delete-data` deletes it)"), markup=False)


def _after_what(result: offline.Plan) -> str:
    return "the kept data disk" if result.outputs.get("cloud") == "gce" else "the kept images"


def confirm(args: argparse.Namespace, verb: str) -> None:
    if args.yes:
        return
    if not sys.stdin.isatty():
        raise UsageError(f"no terminal to ask on: pass --yes to {verb} stack {args.stack} (nothing was done)",
                         prog=f"gemma4-t4 {args.command}")
    if not Confirm.ask(f"{verb} stack {args.stack}?", default=False):
        fail(args.command, f"not confirmed: nothing was done to stack {args.stack}")


def progress(line: str) -> None:
    err_console.print(line, markup=False)


def failed(stack: str, attempt: Attempt, verb: str) -> NoReturn:
    """Pulumi's own diagnostics, as it printed them: each failed resource's, then the engine's."""
    for each in attempt.failed:
        err_console.print(f"{each.type} {each.urn.rsplit('::', 1)[-1]}: {each.message}", markup=False)
    said = [*(f.message for f in attempt.failed[:1]), *attempt.errors]
    detail = attempt.output if not said else ""
    raise _Failure(f"pulumi {verb} failed for stack {stack}: " + (said[0].splitlines()[0] if said else
                   "see Pulumi's output above (--verbose)"), detail or attempt.output)


class _Failure(TargetError):
    pass


def finish(args: argparse.Namespace, outputs: dict[str, Any], result: offline.Plan) -> int:
    """After `pulumi up`: the first boot's phases until it answers, then the query line, the price, how to stop."""
    stack = args.stack
    price = outputs.get("cost_per_hour_usd")
    end = [f"query:  gemma4-t4 query -s {stack} \"Name the four inner planets.\"",
           f"costs:  ${price:.4f}/h at list price while it serves" if isinstance(price, (int, float)) else "",
           f"stop:   gemma4-t4 down {stack}   (or `gemma4-t4 stop -s {stack}` on GCE: keeps the disks)"]
    healthy = True
    if not args.no_wait:
        target = clouds.stack_target(stack, outputs, compute_endpoint=args.compute_endpoint)
        try:
            with wait_view.board(target.label) as shown:
                result_ = ops.wait(target, timeout_s=ops.WAIT_TIMEOUT_S, on_tick=shown.tick, on_boot=shown.boot)
        finally:
            target.close()
        healthy = result_.healthy
        if not healthy:
            err_console.print(ops.wait_failure(result_, ops.WAIT_TIMEOUT_S), markup=False)
    for line in filter(None, end):
        console.print(line, markup=False)
    return EXIT_OK if healthy else EXIT_FAILED
