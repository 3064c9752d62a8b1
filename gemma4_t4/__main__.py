"""`python -m gemma4_t4 COMMAND`: the operator's command line."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _plan(args: argparse.Namespace) -> int:
    from components.errors import ConfigError

    from . import plan as plan_mod

    try:
        config = plan_mod.load_stack_config(args.stack, args.config or [])
        result = plan_mod.run_program(args.stack, config)
    except (ConfigError, FileNotFoundError) as err:
        print(f"gemma4-t4 plan: refused: {err}", file=sys.stderr)
        return 1
    if args.user_data:
        text = plan_mod.user_data(result)
        if text is None:
            print(f"gemma4-t4 plan: stack {args.stack} renders no user-data", file=sys.stderr)
            return 1
        Path(args.user_data).write_text(text)
    print(json.dumps(result.as_json(), indent=2, sort_keys=True) if args.json else plan_mod.format_plan(result))
    return 0


def _fit(args: argparse.Namespace) -> int:
    sys.path.insert(0, str(REPO / "turing"))
    from turing_clamp import fit

    argv = (["--json"] if args.json else []) + (["--strict"] if args.strict else [])
    return fit.main(argv)


def _preflight(args: argparse.Namespace) -> int:
    from components.errors import ConfigError

    from . import plan as plan_mod
    from . import preflight

    try:
        checks = preflight.run(args.stack, plan_mod.load_stack_config(args.stack, args.config or []), args.project)
    except (preflight.PreflightError, ConfigError, FileNotFoundError) as err:
        print(f"gemma4-t4 preflight: {err}", file=sys.stderr)
        return 1
    print(preflight.format_checks(checks))
    return 0 if all(c.ok for c in checks) else 1


def _target(args: argparse.Namespace):
    from .ops import resolve_target

    return resolve_target(url=args.url, stack=args.stack, endpoint=args.endpoint, region=args.region,
                          endpoint_url=args.endpoint_url)


def _operate(args: argparse.Namespace) -> int:
    """status, wait, query, logs, bench: one target, clear errors, non-zero exit on failure."""
    from . import bench, ops
    from .targets import TargetError

    if args.command == "bench" and args.action == ["combine", *args.action[1:]]:
        if len(args.action) != 3:
            print("usage: gemma4-t4 bench combine A.json B.json", file=sys.stderr)
            return 2
        combined = bench.combine(bench.load_json(args.action[1]), bench.load_json(args.action[2]))
        print(bench.format_combined(combined))
        if args.json:
            Path(args.json).write_text(json.dumps(combined, indent=2))
        return 0
    target = None
    try:
        target = _target(args)
        if args.command == "status":
            return ops.status(target)
        if args.command == "wait":
            return ops.wait(target, timeout_s=args.timeout, interval_s=args.interval)
        if args.command == "query":
            return ops.query(target, args.prompt, model=args.model, max_tokens=args.max_tokens,
                             temperature=args.temperature, stream=args.stream)
        if args.command == "logs":
            return target.logs(args.follow)
        plan = bench.BenchPlan(**{k: v for k, v in vars(args).items()
                                  if k in bench.BenchPlan.__dataclass_fields__ and v is not None})
        report = bench.Bench(target, ops.check_model(target, args.model), plan).run(_price(args))
        print(bench.format_report(report))
        if args.json:
            Path(args.json).write_text(json.dumps(report, indent=2))
        return 0
    except TargetError as err:
        print(f"gemma4-t4 {args.command}: {err}", file=sys.stderr)
        return 1
    finally:
        if target is not None:
            target.close()


def _price(args: argparse.Namespace) -> float | None:
    from . import catalog

    if args.price_per_hour is not None:
        return args.price_per_hour
    if args.instance_type:
        return catalog.SAGEMAKER_PRICES[args.instance_type].usd_per_hour
    return None


def _target_options(p: argparse.ArgumentParser) -> None:
    where = p.add_argument_group("target (one of)")
    where.add_argument("--url", help="any OpenAI-compatible server, e.g. http://127.0.0.1:8000")
    where.add_argument("--stack", help="a deployed stack (reads `pulumi stack output`; GCE opens the IAP tunnel)")
    where.add_argument("--endpoint", help="a SageMaker endpoint name (with --region)")
    where.add_argument("--region")
    where.add_argument("--endpoint-url", help=argparse.SUPPRESS)  # a local SageMaker stand-in (tests)
    p.add_argument("--model", help="model id to send (default: the one the server serves)")


def main(argv: list[str] | None = None) -> int:
    sys.path.insert(0, str(REPO))
    parser = argparse.ArgumentParser(prog="gemma4-t4", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("plan", help="run the stack's Pulumi program offline, under mocks")
    p.add_argument("stack", help="gce-t4 or sagemaker-t4 (a Pulumi.STACK.yaml)")
    p.add_argument("--json", action="store_true", help="machine-readable: stack, resources, outputs, cost")
    p.add_argument("--config", action="append", metavar="KEY=VALUE",
                   help="override one key as `pulumi config set` would (dotted path = --path)")
    p.add_argument("--user-data", metavar="PATH", help="write the rendered cloud-config here")
    p.set_defaults(func=_plan)

    f = sub.add_parser("fit", help="compile every Gemma 4 attention kernel for sm_75 with the clamp (no GPU)")
    f.add_argument("--json", action="store_true")
    f.add_argument("--strict", action="store_true", help="also fail on any register spill")
    f.set_defaults(func=_fit)

    p = sub.add_parser("preflight", help="quotas and GPU offerings the stack needs, with the fix for each")
    p.add_argument("stack")
    p.add_argument("--project", help="GCP project (default: gcp:project from the stack file)")
    p.add_argument("--config", action="append", metavar="KEY=VALUE")
    p.set_defaults(func=_preflight)

    p = sub.add_parser("status", help="serving or not, model and max length, VRAM (GCE) or endpoint status")
    _target_options(p)
    p = sub.add_parser("wait", help="poll /health until healthy, with a progress line")
    _target_options(p)
    p.add_argument("--timeout", type=float, default=1800, help="seconds (default 1800)")
    p.add_argument("--interval", type=float, default=15)
    p = sub.add_parser("query", help="one chat completion")
    _target_options(p)
    p.add_argument("prompt")
    p.add_argument("--stream", action="store_true")
    p.add_argument("--max-tokens", type=int, default=256)
    p.add_argument("--temperature", type=float, default=0.0)
    p = sub.add_parser("logs", help="the service journal (GCE) or the endpoint's CloudWatch log (SageMaker)")
    _target_options(p)
    p.add_argument("--follow", action="store_true")
    p = sub.add_parser("bench", help="decode rate, load, quality and $/Mtok; `bench combine A.json B.json`")
    _target_options(p)
    p.add_argument("action", nargs="*", help="`combine A.json B.json` to compare two runs")
    p.add_argument("--json", metavar="OUT", help="write every raw timing here")
    p.add_argument("--price-per-hour", type=float, help="USD per hour for $/Mtok")
    p.add_argument("--instance-type", help="price from the catalog, e.g. ml.g4dn.xlarge")
    for name, kind in (("short", int), ("long", int), ("repeats", int), ("load-tokens", int),
                       ("load-repeats", int), ("questions", int), ("pause-s", float)):
        p.add_argument(f"--{name}", type=kind, help=argparse.SUPPRESS)
    p.add_argument("--concurrency", type=lambda s: tuple(int(x) for x in s.split(",")), help="e.g. 1,4,16")
    for name in ("status", "wait", "query", "logs", "bench"):
        sub.choices[name].set_defaults(func=_operate)

    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
